"""``fusebisect run`` checks every option before the first execution and before the journal is written: a bad
value is one line on stderr, exit 2, no run of the job (which can take hours), no journal that would refuse the
corrected rerun."""

from __future__ import annotations

import sys

import pytest

from fusebisect.cli.app import main

@pytest.mark.parametrize("args,msg", [
    (["--devices", "a,b"], "--devices: 'a' is not a device id (a non-negative integer)"),
    (["--devices", "0,1,0"], "--devices: device 0 given more than once"),
])
def test_bad_options_stop_before_any_run(args, msg, capsys, tmp_path):
    marker = tmp_path / "executed"
    work = tmp_path / "w"
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    rc = main(["run", "--workdir", str(work), *args, "--", sys.executable, "-c", f"open({str(marker)!r}, 'w')"])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("fusebisect: error: ") and err.count("\n") == 1, err
    assert msg.replace("{tmp}", str(tmp_path)) in err
    assert not marker.exists() and not work.exists()
