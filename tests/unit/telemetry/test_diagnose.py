from __future__ import annotations

from runner.telemetry.diagnose import last_traceback


def test_points_at_the_users_frame(tmp_path):
    workdir = tmp_path / "workdir"
    (workdir / "lib").mkdir(parents=True)
    log = tmp_path / "0.log"
    log.write_text(
        "Epoch 1/1\n"
        "Traceback (most recent call last):\n"
        f'  File "{workdir}/train.py", line 40, in <module>\n'
        "    main()\n"
        f'  File "{workdir}/lib/data.py", line 12, in load\n'
        "    open(path)\n"
        '  File "/usr/lib/python3.11/site-packages/numpy/core.py", line 9, in f\n'
        "    raise\n"
        "FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'\n"
    )
    error = last_traceback(log, workdir)
    assert str(error) == "lib/data.py:12: FileNotFoundError: [Errno 2] No such file or directory: 'data.csv'"


def test_no_traceback(tmp_path):
    log = tmp_path / "0.log"
    log.write_text("just exited 3\n")
    assert last_traceback(log, tmp_path) is None
    assert last_traceback(tmp_path / "missing.log", tmp_path) is None


def test_syntax_errors_have_no_traceback_header(tmp_path):
    log = tmp_path / "0.log"
    log.write_text(
        f'  File "{tmp_path}/train.py", line 28\n'
        '    print(f"{x["a"]}")\n'
        "              ^\n"
        "SyntaxError: f-string: unmatched '['\n"
    )
    assert str(last_traceback(log, tmp_path)) == "train.py:28: SyntaxError: f-string: unmatched '['"
