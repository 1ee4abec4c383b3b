"""int8 copies of fp32 ONNX embedding models, made once on the user's machine and checked against fp32.

onnxruntime's dynamic quantization stores the weights of matrix products and embedding tables as int8
(activations are quantized per batch): CPU embedding 1.15-1.5 times as fast, depending on the CPU's int8
instructions, and a quarter of the weights' memory. Matrix products fed by a GELU stay fp32: their inputs
have outliers, and quantizing them alone pulled all-MiniLM-L6-v2's cosine to fp32 down to about 0.93 (with
them kept, 0.993 on average).

A copy lives in the model cache (the model's own folder may be read-only), in a folder named after the
fp32 file's hash, with a record of every file it consists of (size and hash: the tokenizer's files too,
since a changed byte there changes every vector) and how close it came to fp32 on a fixed set of texts.
A copy whose files differ from the record, or that holds a symlink or a special file (a graph linked to
/dev/zero would be hashed forever), is damaged and made again. Every file of the cache is read through one
helper (_cache_file_blocks): only a regular file is opened (never a link, a FIFO, a device), and only up to
the size expected of it; anything else is named in one warning, removed and worked out again. A copy that
cannot be made or comes out too far from fp32 is refused once and remembered (per onnxruntime version), and
the fp32 model stays in use. A copy that could not be written or kept (a full disk, a place taken) is
remembered with the free space the cache had then: the next start tries again once there is more, or an
hour later in any case. The copy is quantized in a private folder of the cache, never beside the model (its
folder may be read-only, and another process may be quantizing it). Searches never use fp32 query vectors
on an index of int8 ones: they compare the model identities (search.py).
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import logging
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from ..digest import model_file_sha256
from ..files import write_atomically
from ..records import readable_time, recorded_at
from .pause import PauseAfterFailure

if TYPE_CHECKING:
    import onnx

log = logging.getLogger(__name__)

# The least mean cosine between the int8 and fp32 vectors of the check texts. Not the least per text: a
# one-word text moves most (all-MiniLM-L6-v2: "ok" 0.976, sentences 0.99-0.996) without moving retrieval
# (SciFact nDCG@10 0.735 vs 0.736).
MIN_COSINE = 0.98
RECORD = "mcp-kb-int8.json"
CHECK_TEXTS = (
    "Employees apply for annual leave in the HR portal at least two weeks ahead.",
    "E5021: the access token expired. Request a new token from the auth service and retry.",
    "Call getUserInfo to read the profile; endpoints live under API-V2.1.",
    "The cluster upgrade starts with the worker nodes, then the control plane.",
    "Claim: vitamin D supplements lower the risk of fractures in older adults.",
    "We randomly assigned 2,000 patients to the treatment or a placebo for twelve weeks.",
    "员工需要提前两周在人事系统中提交年假申请，经直属经理审批后生效。",
    "我们使用TypeScript开发所有前端项目，并用严格模式编译。",
    "How do I declare a request body with Pydantic models in FastAPI?",
    "Book flights through the travel desk; economy class for trips shorter than six hours.",
    "ok",
    "Unused days carry over until the end of March. " * 12,
)
_GELU_OPS = {"Erf", "Gelu", "FastGelu", "BiasGelu", "QuickGelu"}
_ABANDONED_AFTER_SECONDS = 3600
# A copy that could not be written or kept is tried again at the next start once the cache has more free space
# than at the failure, and after this in any case (an unwritable folder, a place taken: free space says nothing).
RETRY_WRITE_AFTER_SECONDS = 3600
# The most read of a record or note (a copy's record lists its files, about 150 bytes each: a model folder of
# 400 files; a note holds a sentence): a file of the cache past it is refused, never read to its end.
_RECORD_BYTES = 64 * 1024
_BLOCK_BYTES = 1 << 20
# Opening flags for files of the cache: a link swapped in after lstat is not followed, a FIFO is not waited on
# (POSIX flags: on Windows, which has no FIFOs, lstat alone guards).
_SAFE_OPEN = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
_GELU_SEARCH_DEPTH = 6  # a GELU written out (x * 0.5 * (1 + erf(x / sqrt 2))) is five nodes deep
# Operators of ONNX and onnxruntime that only a quantized graph holds: such a model is not quantized again.
_QUANTIZED_OPS = {
    "DynamicQuantizeLinear",
    "QuantizeLinear",
    "DequantizeLinear",
    "MatMulInteger",
    "QLinearMatMul",
    "MatMulIntegerToFloat",
    "DynamicQuantizeMatMul",
    "QGemm",
    "QAttention",
    "QEmbedLayerNormalization",
    "QLinearConv",
    "ConvInteger",
    "MatMulNBits",
    "GatherBlockQuantized",
}


@dataclass(frozen=True)
class Int8Copy:
    folder: Path | None  # the copy; None: the model is used from its own folder
    why: str  # how close the copy came to fp32, or why there is none
    # "copy": made and checked; "as_is": the model is quantized already; "refused": the fp32 model stays until the
    # model or onnxruntime changes; "retry_later": the copy could not be written or kept, tried again later
    outcome: Literal["copy", "as_is", "refused", "retry_later"]

    @property
    def lasting(self) -> bool:
        """Whether the outcome holds while the model's files and onnxruntime stay the same."""
        return self.outcome != "retry_later"


def int8_copy(source: Path, model_file: str, cache: Path, embed: Callable[[Path], np.ndarray]) -> Int8Copy:
    """The checked int8 copy of the model in folder `source` (its graph at `model_file`), made under `cache`
    when missing or damaged. `embed(folder)` gives CHECK_TEXTS' vectors with the model in a folder."""
    import onnxruntime

    source_hash = model_file_sha256(source / model_file)
    folder = cache / "mcp-kb-int8" / source_hash[:16]
    refusal = folder.with_name(f"{folder.name}.refused-ort{onnxruntime.__version__}.json")
    kept = _kept_copy(folder, model_file)
    if kept:
        return kept
    as_is = _quantized_already(source / model_file, folder.with_name(f"{folder.name}.quantized.json"))
    if as_is:
        return Int8Copy(None, as_is, "as_is")
    refused = _recorded_why(refusal)
    if refused:
        return Int8Copy(None, refused, "refused")
    unkept = folder.with_name(f"{folder.name}.unkept.json")
    recently = _failed_recently(unkept)
    if recently:
        return Int8Copy(None, recently, "retry_later")
    try:
        return _make(source, model_file, folder, refusal, embed)
    except OSError as exc:  # a full disk, an unwritable cache: says nothing about the model, so tried again later
        why = f"the int8 copy could not be written under {folder.parent} ({exc})"
        _remember_failure(unkept, why)
        return Int8Copy(None, why, "retry_later")


def _quantized_already(model: Path, verdict: Path) -> str | None:
    """Why the model is used as it is when its graph is quantized already, or None; the verdict of reading the
    graph (a second of parsing for a large model) is remembered beside the copies, by the model's hash."""
    remembered = _recorded_why(verdict)  # "": not quantized
    if remembered is not None:
        return remembered or None
    import onnx

    try:
        found = sorted(
            {node.op_type for node in onnx.load(str(model), load_external_data=False).graph.node} & _QUANTIZED_OPS
        )
    except Exception:  # a graph onnx cannot read: quantizing it fails and says why
        return None
    why = f"the model is quantized already ({', '.join(found)}): used as it is" if found else ""
    with contextlib.suppress(OSError):  # read again next time
        write_atomically(verdict, json.dumps({"why": why}).encode("utf-8"))
    return why or None


def _recorded_why(record: Path) -> str | None:
    """The reason a record beside the copies keeps (a refusal, a verdict), or None (none, or an unreadable record:
    worked out again)."""
    note = _note(record)
    return None if note is None or "why" not in note else str(note["why"])


def _failed_recently(unkept: Path) -> str | None:
    """Why the copy could not be written or kept, while trying again would fail the same way: less than
    RETRY_WRITE_AFTER_SECONDS ago, with no more free space in the cache than then (each start would otherwise
    quantize for seconds and throw the copy away)."""
    note = _note(unkept) or {}
    try:
        at, why = float(note["at"]), str(note["why"])
    except (KeyError, TypeError, ValueError):
        return None
    free, now_free = note.get("free"), _free_bytes(unkept.parent)
    if isinstance(free, int) and now_free is not None and now_free > free:
        return None  # space was made since
    pause = PauseAfterFailure[str](RETRY_WRITE_AFTER_SECONDS, clock=time.time)  # wall time: it outlives a process
    pause.failed(why, at)
    if pause.recent() is None:
        return None
    return (
        f"{why}, at {readable_time(recorded_at(datetime.fromtimestamp(at, UTC)))}; tried again once the cache has more free space, or "
        f"{RETRY_WRITE_AFTER_SECONDS // 60} minutes after"
    )


def _remember_failure(unkept: Path, why: str) -> None:
    note = {"why": why, "at": time.time(), "free": _free_bytes(unkept.parent)}
    with contextlib.suppress(OSError):  # the cache takes nothing at all: an attempt fails there at once
        write_atomically(unkept, json.dumps(note).encode("utf-8"))


def _free_bytes(place: Path) -> int | None:
    """The free bytes (for this user) of the file system holding `place`, or its nearest folder that exists."""
    for folder in (place, *place.parents):
        with contextlib.suppress(OSError):
            return shutil.disk_usage(folder).free
    return None


def _note(path: Path) -> dict[str, Any] | None:  # json.loads of a note file
    """The JSON object a note beside the copies holds (a refusal, a verdict, a failure), or None: none, or
    unreadable (worked out again). Anything but a regular file in its place is removed, with one warning."""
    try:
        note = json.loads(_read_record(path))
    except _NotAFile as exc:
        log.warning("int8 model cache: %s; removed, worked out again", exc)
        _remove(path)
        return None
    except (OSError, ValueError):
        return None
    return note if isinstance(note, dict) else None


def _kept_copy(folder: Path, model_file: str) -> Int8Copy | None:
    """A copy made earlier whose files are still those recorded when it was made; a damaged one is removed."""
    try:
        sizes = _regular_files(folder)  # first: nothing is read in a folder holding a link or a special file
        record = json.loads(_read_record(folder / RECORD))
        if model_file in sizes and _intact(folder, sizes, record["files"]):
            return Int8Copy(folder, str(record["closeness"]), "copy")
        damage = ""
    except _NotAFile as exc:
        damage = f" ({exc})"
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        if not os.path.lexists(folder):
            return None
        damage = ""
    log.warning(
        "the int8 copy of the embedding model in %s is damaged or incomplete; making it again%s", folder, damage
    )
    _remove(folder)
    return None


def _remove(path: Path) -> None:
    """A damaged copy or note, whatever it is: a folder's tree, or the link or file in its place (never followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        with contextlib.suppress(OSError):
            path.unlink()


def _make(source: Path, model_file: str, folder: Path, refusal: Path, embed: Callable[[Path], np.ndarray]) -> Int8Copy:
    _remove_abandoned(folder)
    building = folder.with_name(f".{folder.name}.{os.getpid()}.building")
    try:
        return _build(source, model_file, _Places(folder, building, refusal), embed)
    finally:
        shutil.rmtree(building, ignore_errors=True)  # renamed into place by now, or given up


@dataclass(frozen=True)
class _Places:
    """Where an int8 copy goes (`folder`), where it is built first (`building`, renamed into place whole), and
    where a refusal to make it is noted."""

    folder: Path
    building: Path
    refusal: Path


def _build(source: Path, model_file: str, places: _Places, embed: Callable[[Path], np.ndarray]) -> Int8Copy:
    folder, building, refusal = places.folder, places.building, places.refusal
    _copy_support_files(source, building)
    log.info("making an int8 copy of the embedding model in %s (once)", folder)
    try:
        _check_room(source / model_file, building)
        _quantize(source / model_file, building / model_file)
        cosines = _cosines(embed(source), embed(building))
    except OSError:
        raise  # a full disk says nothing about the model: not remembered
    except Exception as exc:  # an unsupported graph: onnx and onnxruntime raise many kinds
        _check_room(source / model_file, building)  # or a graph onnx wrote short on a disk filled meanwhile
        return _refuse(refusal, f"quantizing the model failed ({type(exc).__name__}: {exc})")
    closeness = (
        f"cosine to the fp32 vectors of {len(cosines)} check texts: mean {cosines.mean():.4f}, "
        f"lowest {cosines.min():.4f}"
    )
    if cosines.mean() < MIN_COSINE:
        return _refuse(
            refusal,
            f"the int8 copy came out too far from the fp32 model ({closeness}; the mean must reach {MIN_COSINE})",
        )
    files = _inventory(building)
    record = {"int8_sha256": files[model_file][1], "closeness": closeness, "files": files}
    (building / RECORD).write_text(json.dumps(record), encoding="utf-8")
    try:
        building.rename(folder)  # whole or not at all
    except OSError:  # another process finished first, or the place cannot be had
        kept = _kept_copy(folder, model_file)
        if kept is None:
            raise
        return kept
    return Int8Copy(folder, closeness, "copy")


class _NotAFile(ValueError):
    """A file of the cache that is not what is kept there: a link, a folder, a special file, or larger than expected."""

    def __init__(self, path: Path, what: str):
        super().__init__(f"{path} is {what}")


def _cache_file_blocks(path: Path, most: int) -> Iterator[bytes]:
    """The bytes of the regular file `path` in the cache, in blocks, never more than `most`; _NotAFile, before
    anything is read, when it is anything else (a link would lead to /dev/zero or out of the cache, a FIFO
    would block the start, a device never ends) or larger. The one way the cache's files are read."""
    mode = path.lstat().st_mode
    if not stat.S_ISREG(mode):
        raise _NotAFile(path, _kind(mode))
    descriptor = os.open(path, _SAFE_OPEN)
    with os.fdopen(descriptor, "rb") as handle:
        found = os.fstat(descriptor)  # what was opened, should it have been swapped since lstat
        if not stat.S_ISREG(found.st_mode):
            raise _NotAFile(path, _kind(found.st_mode))
        if found.st_size > most:
            raise _NotAFile(path, f"{found.st_size} bytes, more than the {most} expected")
        left = most
        while left and (block := handle.read(min(left, _BLOCK_BYTES))):
            left -= len(block)
            yield block


def _kind(mode: int) -> str:
    """What a file that is not a regular one is, for a warning."""
    kinds = (
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for is_kind, name in kinds if is_kind(mode)), "a special file")


def _read_record(path: Path) -> bytes:
    return b"".join(_cache_file_blocks(path, _RECORD_BYTES))


def _sha256(path: Path, size: int) -> str:
    """SHA-256 of a file of a copy, read up to the size recorded for it."""
    digest = hashlib.sha256()
    for block in _cache_file_blocks(path, size):
        digest.update(block)
    return digest.hexdigest()


def _regular_files(folder: Path) -> dict[str, int]:
    """Every file under `folder` but the record, by relative path, with its size; _NotAFile when it is or holds
    anything but folders and regular files (read without following any link)."""
    mode = folder.lstat().st_mode
    if not stat.S_ISDIR(mode):
        raise _NotAFile(folder, _kind(mode))
    sizes = {}
    for root, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            path = Path(root, name)
            found = path.lstat()
            if not (stat.S_ISDIR(found.st_mode) or stat.S_ISREG(found.st_mode)):
                raise _NotAFile(path, _kind(found.st_mode))
            relative = path.relative_to(folder).as_posix()
            if stat.S_ISREG(found.st_mode) and relative != RECORD:
                sizes[relative] = found.st_size
    return sizes


def _inventory(folder: Path) -> dict[str, list[int | str]]:
    """What the record holds of each file: [size, sha256]."""
    return {name: [size, _sha256(folder / name, size)] for name, size in sorted(_regular_files(folder).items())}


def _intact(folder: Path, sizes: dict[str, int], recorded: dict[str, list[int | str]]) -> bool:
    """Whether the copy, whose files have `sizes`, holds exactly the recorded files, each of its recorded size and
    hash (sizes are compared first, and a file is read up to its recorded size only)."""
    if sizes != {name: size for name, (size, _) in recorded.items()}:
        return False
    return all(_sha256(folder / name, sizes[name]) == digest for name, (_, digest) in recorded.items())


def _remove_abandoned(folder: Path) -> None:
    """Half-made copies of this model left by processes killed while making them (one may still be at work:
    only those untouched for an hour go)."""
    for building in folder.parent.glob(f".{folder.name}.*.building"):
        try:
            if time.time() - building.stat().st_mtime > _ABANDONED_AFTER_SECONDS:
                shutil.rmtree(building, ignore_errors=True)
        except OSError:
            continue


def _refuse(refusal: Path, why: str) -> Int8Copy:
    write_atomically(refusal, json.dumps({"why": why}).encode("utf-8"))
    return Int8Copy(None, why, "refused")


def _copy_support_files(source: Path, target: Path) -> None:
    """Everything but the ONNX graphs (tokenizer, configs), so fastembed loads the copy as it loads the source."""
    for path in source.rglob("*"):
        if path.is_file() and ".onnx" not in path.name:
            destination = target / path.relative_to(source)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    target.mkdir(parents=True, exist_ok=True)


def _check_room(fp32: Path, building: Path) -> None:
    """OSError (ENOSPC) when the cache has less free space than making the copy takes: the fp32 graph's size and a
    quarter to spare, as the quantizer first writes that graph again with its shapes inferred (removed before the
    int8 graph, a third of it, is written). onnx cuts that file short on a full disk without a word: the quantizer
    would fail as on a broken graph, and the model be refused for good."""
    needed = fp32.stat().st_size * 5 // 4
    free = _free_bytes(building)
    if free is not None and free < needed:
        raise OSError(
            errno.ENOSPC,
            f"{os.strerror(errno.ENOSPC)}: {free} bytes free, making the copy takes about {needed}",
            str(building),
        )


def _quantize(fp32: Path, int8: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    int8.parent.mkdir(parents=True, exist_ok=True)
    graph = onnx.load(str(fp32), load_external_data=False).graph
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer logs a line per tensor, and advice, on the root logger
    # The quantizer writes the graph with inferred shapes beside the one it is given (<name>-inferred.onnx): it is
    # given a link in a private folder, so a read-only model folder gets its copy and two processes quantizing one
    # model never share that file.
    try:
        with tempfile.TemporaryDirectory(prefix=".quantizing.", dir=int8.parent) as private:
            quantize_dynamic(
                str(_linked(fp32, Path(private))),
                str(int8),
                op_types_to_quantize=["MatMul", "Gather"],
                per_channel=True,
                weight_type=QuantType.QInt8,
                nodes_to_exclude=_fed_by_gelu(graph),
            )
    finally:
        root.setLevel(level)


def _linked(model: Path, folder: Path) -> Path:
    """A link to `model` in `folder` (a copy where links cannot be made: Windows without the right)."""
    link = folder / model.name
    try:
        link.symlink_to(model.absolute())
    except OSError:
        shutil.copyfile(model, link)
    return link


def _fed_by_gelu(graph: onnx.GraphProto) -> list[str]:
    """The MatMul nodes whose input comes from a GELU through elementwise nodes only."""
    producer = {output: node for node in graph.node for output in node.output}

    def after_gelu(name: str, depth: int) -> bool:
        node = producer.get(name)
        if node is None or depth == 0 or node.op_type == "MatMul":
            return False
        return node.op_type in _GELU_OPS or any(after_gelu(i, depth - 1) for i in node.input)

    return [
        node.name for node in graph.node if node.op_type == "MatMul" and after_gelu(node.input[0], _GELU_SEARCH_DEPTH)
    ]


def _cosines(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    reference = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    candidate = candidate / np.linalg.norm(candidate, axis=1, keepdims=True)
    cosines: np.ndarray = np.sum(reference * candidate, axis=1)
    return cosines
