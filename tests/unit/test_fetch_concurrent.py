"""Two `capsule fetch all` at once into an empty cache both end with exit 0: the one whose rename comes
second verifies the other's model directory and uses it (before: `OSError: [Errno 39] Directory not
empty` and a traceback).

Each is a real `capsule fetch all` process; only the slow steps are stand-ins (the GGUF from the
wheel, and transformers' dequantization, which writes two small files here and then waits until the
other process has built too, so both reach the rename). The rename, the record and the verification
are the real ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from capsule.artifacts.embedded_model import MODEL_DIR_NAME, MODEL_RECORD, verify_model_dir

ROOT = Path(__file__).resolve().parents[2]

DRIVER = """
import os, sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from capsule.artifacts import embedded_model
from capsule.cli import main

meeting = Path(sys.argv[1])

def gguf():  # where the real one extracts it: the cache's models/ directory
    path = embedded_model.gguf_cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"stand-in")
    return path, "a stand-in GGUF"

def dequantize(gguf_path, out_dir):
    (out_dir / "config.json").write_text('{{"architectures": ["LlamaForCausalLM"]}}')
    (out_dir / "model.safetensors").write_bytes(b"the same weights" * 1000)
    (meeting / f"built-{{os.getpid()}}").touch()
    deadline = time.monotonic() + 60
    while len(list(meeting.glob("built-*"))) < 2:  # both built: each goes on to rename
        if time.monotonic() > deadline:
            sys.exit("the other fetch never built")
        time.sleep(0.02)

embedded_model.fetch_gguf = gguf
embedded_model._dequantize = dequantize
sys.argv = ["capsule", "fetch", "all"]
main()
"""


def test_two_concurrent_fetches_both_succeed(tmp_path: Path, prompts_path: Path) -> None:
    cache, meeting = tmp_path / "cache", tmp_path / "meeting"
    meeting.mkdir()
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER.format(root=str(ROOT)))
    env = {**os.environ, "CAPSULE_CACHE": str(cache), "CAPSULE_PROMPTS": str(prompts_path)}
    processes = [
        subprocess.Popen([sys.executable, str(driver), str(meeting)], env=env, text=True,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        for _ in range(2)
    ]  # fmt: skip
    outputs = [process.communicate(timeout=120)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], outputs
    assert not any("Traceback" in output for output in outputs), outputs
    sources = sorted(line for output in outputs for line in output.splitlines() if line.startswith("model:"))
    assert "built from a stand-in GGUF" in sources[0] + sources[1]
    assert "cache (built by a concurrent fetch, verified)" in sources[0] + sources[1]
    directory = cache / "models" / MODEL_DIR_NAME
    assert verify_model_dir(directory)["files"].keys() == {"config.json", "model.safetensors"}
    assert [p.name for p in directory.parent.iterdir() if p.is_dir()] == [MODEL_DIR_NAME]  # no scratch left
    assert json.loads((directory / MODEL_RECORD).read_text())["name"]
