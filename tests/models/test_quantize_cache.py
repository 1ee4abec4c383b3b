"""The int8 cache (quantize.py) against what others leave in it or do beside it: links, FIFOs and oversized files
where its records and copies live, a read-only model folder, two processes making one copy, a full disk. On a
tiny model of real files (an embedding table and a projection: quantized and checked in a few milliseconds)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import stat
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mcp_kb.digest import file_sha256
from mcp_kb.models import quantize

VOCAB, DIM, TOKENS = 2000, 64, 16
MODEL = "model.onnx"
TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parents[1]
QUANTIZE_LOG = "mcp_kb.models.quantize"
PLACES = ["copy", "record", "graph", "verdict", "refusal", "failure note"]
pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs, links to /dev/zero and tmpfs are POSIX's")


def make_tiny_model(folder: Path) -> Path:
    """A model folder: an ONNX graph (Gather from an embedding table, MatMul, mean over tokens) and a tokenizer."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "input_ids"], ["embedded"], name="embed"),
            helper.make_node("MatMul", ["embedded", "weights"], ["projected"], name="project"),
            helper.make_node("ReduceMean", ["projected"], ["pooled"], axes=[1], keepdims=0, name="pool"),
        ],
        "tiny",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"])],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", DIM])],
        [
            numpy_helper.from_array(rng.normal(size=(VOCAB, DIM)).astype(np.float32), "table"),
            numpy_helper.from_array(rng.normal(size=(DIM, DIM)).astype(np.float32), "weights"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    folder.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(folder / MODEL))
    (folder / "tokenizer.json").write_text(json.dumps({"vocab": VOCAB}))
    return folder


def embed_tiny(folder: Path) -> np.ndarray:
    """quantize.CHECK_TEXTS' vectors by the tiny model in `folder` (a character is a token)."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(folder / MODEL), providers=["CPUExecutionProvider"])
    ids = np.array([[ord(c) % VOCAB for c in text[:TOKENS].ljust(TOKENS)] for text in quantize.CHECK_TEXTS])
    return np.asarray(session.run(None, {"input_ids": ids})[0], dtype=np.float32)


def start(source: Path, cache: Path) -> quantize.Int8Copy:
    return quantize.int8_copy(source, MODEL, cache, embed_tiny)


def places(source: Path, cache: Path) -> dict[str, Path]:
    """Where the cache keeps what for the model in `source`."""
    import onnxruntime

    folder = cache / "mcp-kb-int8" / file_sha256(source / MODEL)[:16]
    return {
        "copy": folder,
        "record": folder / quantize.RECORD,
        "graph": folder / MODEL,
        "verdict": folder.with_name(f"{folder.name}.quantized.json"),
        "refusal": folder.with_name(f"{folder.name}.refused-ort{onnxruntime.__version__}.json"),
        "failure note": folder.with_name(f"{folder.name}.unkept.json"),
    }


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model, quantized once already in this process (the imports are done: reads counted are the start's)."""
    folder = make_tiny_model(tmp_path_factory.mktemp("tiny-model"))
    assert start(folder, tmp_path_factory.mktemp("warm-cache")).outcome == "copy"
    return folder


def start_within(source: Path, cache: Path, seconds: float = 60) -> quantize.Int8Copy:
    """int8_copy in a thread: a test failure when it has not returned within `seconds` (a FIFO it waits on in the
    cache is then opened for writing and closed, so the thread ends)."""
    outcome: dict[str, quantize.Int8Copy | BaseException] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["copy"] = start(source, cache)
        except BaseException as exc:
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(seconds):
        for path in cache.rglob("*"):
            if stat.S_ISFIFO(path.lstat().st_mode):
                try:
                    os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
                except OSError:
                    continue
        done.wait(10)
        pytest.fail(f"the start did not return within {seconds} s")
    if "error" in outcome:
        error = outcome["error"]
        assert isinstance(error, BaseException)
        raise error
    copy = outcome["copy"]
    assert isinstance(copy, quantize.Int8Copy)
    return copy


def bytes_read() -> int:
    """Bytes this process has read so far (Linux counts every read call's)."""
    if not Path("/proc/self/io").exists():
        pytest.skip("counting the bytes read needs Linux's /proc/self/io")
    counters = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
    return int(counters["rchar"])


def put_in_place(source: Path, cache: Path, place: str) -> Path:
    """The path of `place`, free for something else: a copy is made first when the place is in it."""
    path = places(source, cache)[place]
    if place in ("copy", "record", "graph"):
        assert start(source, cache).outcome == "copy"
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def a_copy_made_again(source: Path, cache: Path, copy: quantize.Int8Copy, path: Path) -> None:
    """The start made a good copy, and what was in `path` is gone (removed, or replaced by a regular file)."""
    assert copy.outcome == "copy" and copy.folder == places(source, cache)["copy"], copy
    mode = path.lstat().st_mode if os.path.lexists(path) else None
    assert mode is None or stat.S_ISREG(mode) or (path == copy.folder and stat.S_ISDIR(mode))


def warned(caplog: pytest.LogCaptureFixture, text: str) -> None:
    lines = [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING]
    assert len(lines) == 1 and text in lines[0], lines


@pytest.mark.parametrize("place", PLACES)
def test_a_fifo_in_the_cache_never_blocks_the_start(
    source: Path, tmp_path: Path, place: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Reading a FIFO waits for a writer that never comes: the server would never start."""
    cache = tmp_path / "cache"
    path = put_in_place(source, cache, place)
    os.mkfifo(path)
    with caplog.at_level(logging.WARNING, logger=QUANTIZE_LOG):
        copy = start_within(source, cache)
    a_copy_made_again(source, cache, copy, path)
    warned(caplog, f"{path} is a FIFO")


@pytest.mark.parametrize("place", PLACES)
def test_a_link_to_dev_zero_in_the_cache_is_never_read(
    source: Path, tmp_path: Path, place: str, caplog: pytest.LogCaptureFixture
) -> None:
    """/dev/zero never ends: hashing or reading it as a record would take the start's memory or time."""
    cache = tmp_path / "cache"
    path = put_in_place(source, cache, place)
    path.symlink_to("/dev/zero")
    read = bytes_read()
    with caplog.at_level(logging.WARNING, logger=QUANTIZE_LOG):
        copy = start_within(source, cache)
    assert bytes_read() - read < 16 << 20  # the start's own reads, about 3 MB for this model
    a_copy_made_again(source, cache, copy, path)
    warned(caplog, f"{path} is a symbolic link")


@pytest.mark.parametrize("place", PLACES)
def test_a_link_out_of_the_cache_is_not_followed(
    source: Path, tmp_path: Path, place: str, caplog: pytest.LogCaptureFixture
) -> None:
    """What a link points at, even a good copy or a fitting record, is another's: the link is removed, the target
    left as it was."""
    planted = {
        "refusal": {"why": "planted refusal"},
        "verdict": {"why": "planted: used as it is"},
        "failure note": {"why": "planted failure", "at": time.time(), "free": 1 << 62},
    }
    cache, elsewhere = tmp_path / "cache", tmp_path / "elsewhere"
    if place in planted:
        elsewhere.write_text(json.dumps(planted[place]))
    else:  # the copy, its record or its graph, as made by another cache
        made = places(source, tmp_path / "other-cache")[place]
        assert start(source, tmp_path / "other-cache").outcome == "copy"
        made.rename(elsewhere)
    path = put_in_place(source, cache, place)
    path.symlink_to(elsewhere)
    kept = sorted(p.name for p in elsewhere.iterdir()) if elsewhere.is_dir() else elsewhere.read_bytes()
    with caplog.at_level(logging.WARNING, logger=QUANTIZE_LOG):
        copy = start_within(source, cache)
    a_copy_made_again(source, cache, copy, path)
    assert "planted" not in copy.why
    warned(caplog, f"{path} is a symbolic link")
    assert kept == (sorted(p.name for p in elsewhere.iterdir()) if elsewhere.is_dir() else elsewhere.read_bytes())


@pytest.mark.parametrize("place", ["record", "verdict", "refusal", "failure note"])
def test_a_record_larger_than_any_record_is_refused_unread(
    source: Path, tmp_path: Path, place: str, caplog: pytest.LogCaptureFixture
) -> None:
    cache = tmp_path / "cache"
    path = put_in_place(source, cache, place)
    with path.open("wb") as record:
        record.truncate(100 << 20)  # 100 MB of zeros, sparse: nothing to write
    read = bytes_read()
    with caplog.at_level(logging.WARNING, logger=QUANTIZE_LOG):
        copy = start_within(source, cache)
    assert bytes_read() - read < 16 << 20
    a_copy_made_again(source, cache, copy, path)
    warned(caplog, f"{path} is {100 << 20} bytes, more than the")


def test_a_copy_is_made_from_a_read_only_model_folder_writing_nothing_there(tmp_path: Path) -> None:
    """A shared model is mounted read-only: the quantizer's graph with inferred shapes goes to a private folder."""
    model = make_tiny_model(tmp_path / "model")
    listing = sorted(os.listdir(model))
    os.utime(model, ns=(0, 0))  # any file made or removed there, even for a moment, sets it to now
    for path in model.iterdir():
        path.chmod(0o444)
    model.chmod(0o555)
    try:
        copy = start(model, tmp_path / "cache")
        assert copy.outcome == "copy", copy
        assert sorted(os.listdir(model)) == listing and model.stat().st_mtime_ns == 0
    finally:
        model.chmod(0o755)


CHILD_MAKING_A_COPY = """
import json, sys, time
from pathlib import Path

import onnx.shape_inference

source, cache, meeting, tests, me = sys.argv[1:]
sys.path.insert(0, tests)
from test_quantize_cache import start

infer = onnx.shape_inference.infer_shapes_path
met = []


def infer_then_meet(*args, **kwargs):  # both processes have written the graph with shapes before either reads it
    infer(*args, **kwargs)
    (Path(meeting) / me).touch()
    deadline = time.monotonic() + 120
    while len(list(Path(meeting).iterdir())) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    met.append(len(list(Path(meeting).iterdir())) == 2)


onnx.shape_inference.infer_shapes_path = infer_then_meet
copy = start(Path(source), Path(cache))
print(json.dumps({"outcome": copy.outcome, "folder": str(copy.folder), "why": copy.why, "met": met}))
"""


def test_two_processes_making_one_copy_at_once_both_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model, cache, meeting = make_tiny_model(tmp_path / "model"), tmp_path / "cache", tmp_path / "meeting"
    meeting.mkdir()
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD_MAKING_A_COPY, str(model), str(cache), str(meeting), str(TESTS), name],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    ]
    results = []
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        results.append(json.loads(out.splitlines()[-1]))
    assert all(result["met"] and all(result["met"]) for result in results), results  # they quantized at once
    folder = places(model, cache)["copy"]
    assert [(result["outcome"], result["folder"]) for result in results] == [("copy", str(folder))] * 2, results
    assert sorted(os.listdir(folder.parent)) == sorted([folder.name, places(model, cache)["verdict"].name])
    assert sorted(os.listdir(model)) == ["model.onnx", "tokenizer.json"]
    monkeypatch.setattr(quantize, "_quantize", lambda *_: pytest.fail("quantized again"))
    assert start(model, cache).folder == folder  # the one copy is whole


CHILD_ON_A_SMALL_DISK = """
import json, os, sys
from pathlib import Path

source, cache, tests, when = sys.argv[1:]
sys.path.insert(0, tests)
import onnx.shape_inference
from test_quantize_cache import start

filler = Path(cache) / "filler"


def fill():  # all but 64 KB: room for the failure note, not for the copy
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        while True:
            os.write(descriptor, bytes(1 << 16))
    except OSError:
        os.ftruncate(descriptor, os.fstat(descriptor).st_size - (1 << 16))
    finally:
        os.close(descriptor)


if when == "before":
    fill()
else:  # the disk fills as the quantizer writes the graph with inferred shapes (onnx says nothing of it)
    infer, filled = onnx.shape_inference.infer_shapes_path, []

    def fill_then_infer(*args, **kwargs):
        if not filled:
            filled.append(fill())
        return infer(*args, **kwargs)

    onnx.shape_inference.infer_shapes_path = fill_then_infer
outcomes = []
for _ in range(2):
    copy = start(Path(source), Path(cache))
    outcomes.append([copy.outcome, copy.why])
filler.unlink()
copy = start(Path(source), Path(cache))
outcomes.append([copy.outcome, copy.why])
print(json.dumps(outcomes))
"""


def _on_a_small_disk(model: Path, cache: Path, when: str) -> list[list[str]]:
    """CHILD_ON_A_SMALL_DISK's starts, run with the cache on a 4 MB tmpfs of its own (a mount namespace)."""
    cache.mkdir()
    mount = ["unshare", "-rm", "sh", "-c", 'mount -t tmpfs -o size=4m tmpfs "$0" && exec "$@"', str(cache)]
    if not shutil.which("unshare") or subprocess.run([*mount, "true"], capture_output=True).returncode:
        pytest.skip("mounting a small tmpfs needs a mount namespace (unshare -rm)")
    run = subprocess.run(
        [*mount, sys.executable, "-c", CHILD_ON_A_SMALL_DISK, str(model), str(cache), str(TESTS), when],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr
    outcomes: list[list[str]] = json.loads(run.stdout.splitlines()[-1])
    return outcomes


def test_a_full_disk_is_tried_again_once_space_is_freed(tmp_path: Path) -> None:
    full, still_full, freed = _on_a_small_disk(make_tiny_model(tmp_path / "model"), tmp_path / "cache", "before")
    assert full[0] == "retry_later" and "No space left on device" in full[1]
    assert still_full[0] == "retry_later" and "tried again once the cache has more free space" in still_full[1]
    assert freed[0] == "copy", freed


def test_a_disk_filled_while_quantizing_is_tried_again_not_refused(tmp_path: Path) -> None:
    """onnx cuts the graph with inferred shapes short on a full disk without a word; the quantizer then fails as on
    a broken graph, which must not refuse the model for good."""
    full, still_full, freed = _on_a_small_disk(make_tiny_model(tmp_path / "model"), tmp_path / "cache", "during")
    assert full[0] == "retry_later" and "No space left on device" in full[1], full
    assert still_full[0] == "retry_later" and "tried again once the cache has more free space" in still_full[1]
    assert freed[0] == "copy", freed
