from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path


def test_busy_listen_port_is_a_clear_error_and_exit_1(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = subprocess.run(
            [sys.executable, "-m", "exporter", "serve", "--engine-url", "http://127.0.0.1:1",
             "--listen", f"127.0.0.1:{port}", "--state-dir", str(tmp_path), "--no-nvml",
             "--log-format", "json"],
            capture_output=True, text=True, timeout=60, check=False,
        )
    assert proc.returncode == 1
    assert '"event": "listen_failed"' in proc.stderr
    assert "Traceback" not in proc.stderr
