"""`--host-bits` without `--host-precision quantized` was ignored without a word (the host layers ran
in float); it is now one error saying which option it belongs to."""
import pytest

from hlsnn.cli import main


@pytest.mark.parametrize("command", ["deploy", "report"])
def test_host_bits_alone_is_refused(tmp_path, capsys, command):
    (tmp_path / "m.yaml").write_text("name: m\nmodel: m.onnx\ndata: digits\n")     # refused before it is read
    assert main([command, str(tmp_path / "m.yaml"), "--host-bits", "6"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--host-bits 6: the width of --host-precision quantized" in err, err
