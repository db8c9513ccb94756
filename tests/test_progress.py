"""Progress bars (hlsnn.progress, tqdm on stderr): only on a terminal, never with --quiet or
--json, never on stdout."""
import io
import sys

import pytest

from hlsnn import progress
from hlsnn.cli import main


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_enabled_rules(monkeypatch):
    monkeypatch.delenv("HLSNN_PROGRESS", raising=False)
    assert progress.enabled(stream=_Tty()) is True
    assert progress.enabled(stream=io.StringIO()) is False                 # a pipe or a file: off
    assert progress.enabled(quiet=True, stream=_Tty()) is False
    assert progress.enabled(json=True, stream=_Tty()) is False
    monkeypatch.setenv("HLSNN_PROGRESS", "0")
    assert progress.enabled(stream=_Tty()) is False
    monkeypatch.setenv("HLSNN_PROGRESS", "1")
    assert progress.enabled(stream=io.StringIO()) is True
    assert progress.enabled(json=True) is False


def test_bar_and_ticker_write_to_stderr_only(capsys):
    assert list(progress.bar(range(3), show=False)) == [0, 1, 2]
    assert list(progress.bar(range(3), desc="counting", show=True)) == [0, 1, 2]
    with progress.ticker("waiting", show=True, interval=0.05):
        import time
        time.sleep(0.2)
    out, err = capsys.readouterr()
    assert out == "" and "counting" in err and "waiting" in err


def test_tool_runs_show_elapsed_time_instead_of_heartbeats(tmp_path, capsys):
    from hlsnn.build.flow import run_tool
    run_tool([sys.executable, "-c", "import time; time.sleep(0.8)"], tmp_path, tmp_path / "x.log", "x",
             heartbeat=0.2, progress=True)
    out, err = capsys.readouterr()
    assert "still running" not in out and "[x]" in err
    run_tool([sys.executable, "-c", "import time; time.sleep(0.5)"], tmp_path, tmp_path / "y.log", "y",
             heartbeat=0.2, progress=False)
    out, err = capsys.readouterr()
    assert "still running" in out and "[y]" not in err                       # not a terminal: heartbeats


@pytest.mark.slow
def test_deploy_progress_on_a_terminal_not_in_json(monkeypatch, capsys):
    pytest.importorskip("onnx")
    monkeypatch.setenv("HLSNN_PROGRESS", "1")
    args = ["deploy", "configs/models/digits_mlp.yaml", "--assignment", "bfp8", "--test-samples", "16"]
    assert main(args) == 0
    out, err = capsys.readouterr()
    assert "deploy digits_mlp" in err and "bfp8" in out and "deploy digits_mlp" not in out
    assert main(args + ["--json"]) == 0
    out, err = capsys.readouterr()
    assert "deploy" not in err and out.lstrip().startswith("{")
    assert main(args + ["--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "deploy" not in err
