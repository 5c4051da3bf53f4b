"""The report's widest figures stay within the page: at most MAX_WIDTH_PX wide however many panels they hold."""
import struct

from relin.report.figures import MAX_WIDTH_PX
from relin.report.hedgemamba import half_life_figure
from relin.report.lia_mtr import niah_figure


def _size(path):
    width, height = struct.unpack(">II", path.read_bytes()[16:24])
    return width, height


def test_the_bridge_niah_figure_wraps_eight_bridges_into_rows(tmp_path):
    bridges = [f"bridge_{i}" for i in range(8)]
    items = {b: [{"length": n, "depth": d, "correct": 1} for n in (16, 64) for d in (0.0, 1.0)] for b in bridges}
    history = {b: [{"step": 1.0, "loss": 2.0}, {"step": 2.0, "loss": 1.0}] for b in bridges}
    width, height = _size(niah_figure(items, history, 0.125, tmp_path / "niah.png"))
    assert width <= MAX_WIDTH_PX and height > width / 3, (width, height)


def test_half_life_panels_with_long_titles_stay_within_the_page(tmp_path):
    layer = [{"layer": 0, "half_life": [1.0, 2.0]}, {"layer": 1, "half_life": [3.0, 4.0]}]
    decays = {m: {"init": layer, "trained": layer} for m in ("finetune", "random", "mil", "hedgehog_only")}
    width, _ = _size(half_life_figure(decays, tmp_path / "half_lives.png"))
    assert width <= MAX_WIDTH_PX, width
