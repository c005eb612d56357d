"""examples/quickstart.py (the README's Python example) runs and checks its own reads."""

import os
import runpy

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_quickstart_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    runpy.run_path(os.path.join(ROOT, "examples", "quickstart.py"), run_name="__main__")
    assert (tmp_path / "quickstart.vds").exists()
    assert "amplitude" in capsys.readouterr().out
