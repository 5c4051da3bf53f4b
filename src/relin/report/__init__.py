"""The report: tables and figures built only from stage outputs (metrics.json, history.csv, ...).

- :mod:`.table`: a small table type rendered to Markdown and HTML (later papers add paper-vs-ours tables);
- :mod:`.inputs`: reading stage outputs, each a one-line :class:`~relin.errors.InputError` when wrong;
- :mod:`.tables` / :mod:`.figures`: what the report shows, grouped by model name;
- :mod:`.page`: sections of tables and figures rendered to ``index.html`` and ``summary.md``;
- :mod:`.build`: the whole report written atomically into one directory.
"""
