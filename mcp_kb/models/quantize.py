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
/dev/zero would be hashed forever), is damaged and made again. A copy that cannot be made or comes out too far from fp32 is
refused once and remembered (per onnxruntime version), and the fp32 model stays in use. A copy that could
not be written or kept (a full disk, a place taken) is remembered for an hour, then tried again. Searches
never use fp32 query vectors on an index of int8 ones: they compare the model identities (search.py).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

import numpy as np

from ..digest import file_sha256, model_file_sha256
from ..files import write_atomically
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
RETRY_WRITE_AFTER_SECONDS = 3600  # a copy that could not be written or kept is tried again after this
_GELU_SEARCH_DEPTH = 6  # a GELU written out (x * 0.5 * (1 + erf(x / sqrt 2))) is five nodes deep
# Operators of ONNX and onnxruntime that only a quantized graph holds: such a model is not quantized again.
_QUANTIZED_OPS = {"DynamicQuantizeLinear", "QuantizeLinear", "DequantizeLinear", "MatMulInteger", "QLinearMatMul",
                  "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "QGemm", "QAttention", "QEmbedLayerNormalization",
                  "QLinearConv", "ConvInteger", "MatMulNBits", "GatherBlockQuantized"}


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
        found = sorted({node.op_type for node in onnx.load(str(model), load_external_data=False).graph.node}
                       & _QUANTIZED_OPS)
    except Exception:  # a graph onnx cannot read: quantizing it fails and says why
        return None
    why = f"the model is quantized already ({', '.join(found)}): used as it is" if found else ""
    with contextlib.suppress(OSError):  # read again next time
        write_atomically(verdict, json.dumps({"why": why}).encode("utf-8"))
    return why or None


def _recorded_why(record: Path) -> str | None:
    """The reason a record beside the copies keeps (a refusal, a verdict), or None (none, or an unreadable record:
    worked out again)."""
    try:
        return str(json.loads(record.read_text(encoding="utf-8"))["why"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _failed_recently(unkept: Path) -> str | None:
    """Why the copy could not be written or kept, when that was less than RETRY_WRITE_AFTER_SECONDS ago: each
    start would otherwise quantize for seconds and throw the copy away."""
    try:
        record = json.loads(unkept.read_text(encoding="utf-8"))
        at, why = float(record["at"]), str(record["why"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    pause = PauseAfterFailure[str](RETRY_WRITE_AFTER_SECONDS, clock=time.time)  # wall time: it outlives a process
    pause.failed(why, at)
    if pause.recent() is None:
        return None
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))
    return f"{why}, at {when}; tried again {RETRY_WRITE_AFTER_SECONDS // 60} minutes after"


def _remember_failure(unkept: Path, why: str) -> None:
    with contextlib.suppress(OSError):  # the cache takes nothing at all: an attempt fails there at once
        write_atomically(unkept, json.dumps({"why": why, "at": time.time()}).encode("utf-8"))


def _kept_copy(folder: Path, model_file: str) -> Int8Copy | None:
    """A copy made earlier whose files are still those recorded when it was made; a damaged one is removed."""
    try:
        record = json.loads((folder / RECORD).read_text(encoding="utf-8"))
        if _intact(folder, record["files"], model_file):
            return Int8Copy(folder, record["closeness"], "copy")
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        if not os.path.lexists(folder):
            return None
    log.warning("the int8 copy of the embedding model in %s is damaged or incomplete; making it again", folder)
    if folder.is_symlink():
        folder.unlink()
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return None


def _make(source: Path, model_file: str, folder: Path, refusal: Path,
          embed: Callable[[Path], np.ndarray]) -> Int8Copy:
    _remove_abandoned(folder)
    building = folder.with_name(f".{folder.name}.{os.getpid()}.building")
    try:
        return _build(source, model_file, folder, building, refusal, embed)
    finally:
        shutil.rmtree(building, ignore_errors=True)  # renamed into place by now, or given up


def _build(source: Path, model_file: str, folder: Path, building: Path, refusal: Path,  # noqa: PLR0913  # the copy's source, folders and check
           embed: Callable[[Path], np.ndarray]) -> Int8Copy:
    _copy_support_files(source, building)
    log.info("making an int8 copy of the embedding model in %s (once)", folder)
    try:
        _quantize(source / model_file, building / model_file)
        cosines = _cosines(embed(source), embed(building))
    except OSError:
        raise  # a full disk says nothing about the model: not remembered
    except Exception as exc:  # an unsupported graph: onnx and onnxruntime raise many kinds
        return _refuse(refusal, f"quantizing the model failed ({type(exc).__name__}: {exc})")
    closeness = f"cosine to the fp32 vectors of {len(cosines)} check texts: mean {cosines.mean():.4f}, " \
                f"lowest {cosines.min():.4f}"
    if cosines.mean() < MIN_COSINE:
        return _refuse(refusal, f"the int8 copy came out too far from the fp32 model ({closeness}; "
                                f"the mean must reach {MIN_COSINE})")
    record = {"int8_sha256": model_file_sha256(building / model_file), "closeness": closeness,
              "files": _inventory(building, model_file)}
    (building / RECORD).write_text(json.dumps(record), encoding="utf-8")
    try:
        building.rename(folder)  # whole or not at all
    except OSError:  # another process finished first, or the place cannot be had
        kept = _kept_copy(folder, model_file)
        if kept is None:
            raise
        return kept
    return Int8Copy(folder, closeness, "copy")


def _regular_files(folder: Path) -> dict[str, int]:
    """Every file under `folder` but the record, by relative path, with its size; ValueError when it holds
    anything but folders and regular files (read without following any link)."""
    if folder.is_symlink():
        raise ValueError(f"{folder} is a link")
    sizes = {}
    for root, folders, files in os.walk(folder):
        for name in [*folders, *files]:
            path = Path(root, name)
            mode = path.lstat().st_mode
            if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
                raise ValueError(f"{path} is a link or a special file")
            relative = path.relative_to(folder).as_posix()
            if stat.S_ISREG(mode) and relative != RECORD:
                sizes[relative] = path.lstat().st_size
    return sizes


def _inventory(folder: Path, model_file: str) -> dict[str, list[int | str]]:
    """What the record holds of each file: [size, sha256]."""
    return {name: [size, _sha256(folder / name, name == model_file)]
            for name, size in sorted(_regular_files(folder).items())}


def _intact(folder: Path, recorded: dict[str, list[int | str]], model_file: str) -> bool:
    """Whether the copy holds exactly the recorded files, each of its recorded size and hash (sizes are
    compared first, so no file is read past what was written)."""
    sizes = _regular_files(folder)
    if sizes != {name: size for name, (size, _) in recorded.items()}:
        return False
    return all(_sha256(folder / name, name == model_file) == digest for name, (_, digest) in recorded.items())


def _sha256(path: Path, is_model: bool) -> str:
    return model_file_sha256(path) if is_model else file_sha256(path)  # the graph's hash is remembered


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


def _quantize(fp32: Path, int8: Path) -> None:
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    int8.parent.mkdir(parents=True, exist_ok=True)
    graph = onnx.load(str(fp32), load_external_data=False).graph
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # the quantizer logs a line per tensor, and advice, on the root logger
    try:
        quantize_dynamic(str(fp32), str(int8), op_types_to_quantize=["MatMul", "Gather"], per_channel=True,
                         weight_type=QuantType.QInt8, nodes_to_exclude=_fed_by_gelu(graph))
    finally:
        root.setLevel(level)


def _fed_by_gelu(graph: onnx.GraphProto) -> list[str]:
    """The MatMul nodes whose input comes from a GELU through elementwise nodes only."""
    producer = {output: node for node in graph.node for output in node.output}

    def after_gelu(name: str, depth: int) -> bool:
        node = producer.get(name)
        if node is None or depth == 0 or node.op_type == "MatMul":
            return False
        return node.op_type in _GELU_OPS or any(after_gelu(i, depth - 1) for i in node.input)

    return [node.name for node in graph.node
            if node.op_type == "MatMul" and after_gelu(node.input[0], _GELU_SEARCH_DEPTH)]


def _cosines(reference: np.ndarray, candidate: np.ndarray) -> np.ndarray:
    reference = reference / np.linalg.norm(reference, axis=1, keepdims=True)
    candidate = candidate / np.linalg.norm(candidate, axis=1, keepdims=True)
    cosines: np.ndarray = np.sum(reference * candidate, axis=1)
    return cosines
