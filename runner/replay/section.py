"""The replay's section of summary.md (and so of the pull request's comment) and of the model card:
its line and its table, read from the report a run's serving/ keeps."""

from __future__ import annotations

from pathlib import Path

from runner.serving.layout import REPLAY_REPORT


def replay_markdown(serving_dir: Path, heading: str = "###") -> str:
    """The section, or nothing when the run did not replay (or its report cannot be read)."""
    path = serving_dir / REPLAY_REPORT
    if not path.is_file():
        return ""
    from runner.replay.report import ReplayReport

    try:
        report = ReplayReport.read(path)
    except (OSError, ValueError):  # the run's file: a summary does without a bad one
        return ""
    return f"\n{heading} Replay\n\n{report.line()}\n\n{report.markdown()}\n"
