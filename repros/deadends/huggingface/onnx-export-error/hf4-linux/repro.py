"""Reproducer: "OnnxExporterError: model export to ONNX failed"
(deadends/huggingface/onnx-export-error/hf4-linux).

A small randomly initialised BERT (transformers, built from its config: no Hub) with
transformers' sdpa attention, exported by torch.onnx.export's TorchScript exporter (the one
every release has; ``dynamo=False`` where the argument exists) at opset 11, the opset that
tutorials copy: the attention's ``aten::scaled_dot_product_attention`` has no ONNX symbolic
below opset 14, and torch refuses the model (UnsupportedOperatorError, an OnnxExporterError,
from torch 1.13). Each variant applies one workaround or dead end of the knowledge-base entry
(https://deadends.dev/huggingface/onnx-export-error/hf4-linux) and checks the exported file
as a user would: onnx's checker accepts it, and onnx's reference evaluator runs it and gives
torch's numbers, at the batch it was traced with and at another one. transformers and onnx
come from the harness (entry.yaml `requires`).
"""

from __future__ import annotations

import copy
import inspect
import io
import os
import shutil
import subprocess
import sys
import tempfile

import torch
from reprokit import Unsupported, from_transformers

TUTORIAL_OPSET = 11  # the opset of the baseline: below the attention's (14)
BATCH, SEQ = 2, 6
OTHER_BATCH = 3  # a batch the model was not traced with
TOLERANCE = 1e-4
# what the exporter raises for an operator it has no symbolic for at an opset
EXPORT_ERROR = getattr(getattr(torch.onnx, "errors", None), "OnnxExporterError", RuntimeError)


def bert(impl):
    """A one-layer BERT built from its config with attention ``impl``, in eval mode."""
    BertConfig, BertModel = from_transformers("BertConfig", "BertModel")
    if not hasattr(BertModel, "_from_config"):
        raise Unsupported(
            "this transformers has no attn_implementation (PreTrainedModel._from_config)"
        )
    config = BertConfig(
        num_hidden_layers=1,
        hidden_size=16,
        num_attention_heads=2,
        intermediate_size=32,
        vocab_size=64,
        max_position_embeddings=16,
    )
    torch.manual_seed(0)
    try:
        model = BertModel._from_config(copy.deepcopy(config), attn_implementation=impl)
    except (ValueError, ImportError) as exc:  # a release without this attention for BERT
        raise Unsupported(
            "this transformers does not build BERT with %s attention: %s" % (impl, exc)
        )
    return model.eval()


class Hidden(torch.nn.Module):
    """The model as the exporter is given it: ids in, the last hidden state out (a tensor,
    not transformers' output object), in eval mode: the exporter puts a module back in the
    mode it found it in, and a wrapper left in training mode would turn dropout on."""

    def __init__(self, model):
        super().__init__()
        self.model = model
        self.eval()

    def forward(self, ids):
        return self.model(input_ids=ids, return_dict=False)[0]


def ids(batch):
    return (torch.arange(batch * SEQ).view(batch, SEQ) * 7) % 64


def onnx_module():
    try:
        import onnx
        from onnx.reference import ReferenceEvaluator  # noqa: F401
    except ImportError as exc:  # the harness installs it (entry.yaml requires)
        raise Unsupported(
            "onnx (with its reference evaluator, onnx>=1.13) does not import here: %s" % exc
        )
    return onnx


def max_opset():
    """The highest opset this torch's TorchScript exporter writes."""
    for where in ("torch.onnx._constants", "torch.onnx.symbolic_helper"):
        try:
            module = __import__(where, fromlist=["ONNX_MAX_OPSET"])
        except ImportError:
            continue
        for name in ("ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", "ONNX_MAX_OPSET", "_onnx_main_opset"):
            if hasattr(module, name):
                return int(getattr(module, name))
    return 17


def export(model, opset, dynamic=True):
    """``model`` exported at ``opset`` by the TorchScript exporter, as bytes; with
    ``dynamic`` the batch and sequence axes are named dynamic (dynamic_axes)."""
    onnx_module()  # the exporter of newer torch needs it; the checks need it everywhere
    kwargs = {}
    if "dynamo" in inspect.signature(torch.onnx.export).parameters:
        kwargs["dynamo"] = False  # the TorchScript exporter, the one of every release
    if dynamic:
        kwargs["dynamic_axes"] = {
            "ids": {0: "batch", 1: "sequence"},
            "hidden": {0: "batch", 1: "sequence"},
        }
    buffer = io.BytesIO()
    torch.onnx.export(
        Hidden(model),
        (ids(BATCH),),
        buffer,
        opset_version=opset,
        input_names=["ids"],
        output_names=["hidden"],
        **kwargs,
    )
    return buffer.getvalue()


def lowest_opset_export(model, dynamic=True):
    """``export(model, opset, dynamic)`` at the lowest opset from TUTORIAL_OPSET up that the
    exporter takes, and the opsets it refused an operator at (with its words); any other
    error is raised, and so is a model no opset up to the exporter's highest takes."""
    refused = []
    for opset in range(TUTORIAL_OPSET, max_opset() + 1):
        try:
            return export(model, opset, dynamic), refused
        except EXPORT_ERROR as exc:
            if "opset" not in str(exc):
                raise
            refused.append("%d (%s)" % (opset, str(exc).split(" is not supported")[0][:100]))
    raise RuntimeError(
        "no opset up to %d exports the model: %s" % (max_opset(), "; ".join(refused))
    )


def feed_ids(x):
    """The inputs of a file this reproducer exported: the ids alone."""
    return {"ids": x.numpy()}


def feed_transformers(x):
    """The inputs of a file transformers' exporters write (optimum): ids, mask, segments."""
    return {
        "input_ids": x.numpy(),
        "attention_mask": torch.ones_like(x).numpy(),
        "token_type_ids": torch.zeros_like(x).numpy(),
    }


def checked(data, model, feed=feed_ids) -> dict:
    """Postconditions of an exported file ``data`` (bytes) of ``model``: onnx loads and
    checks it, its batch axis is dynamic, and onnx's reference evaluator gives torch's
    numbers at the traced batch and at OTHER_BATCH (the file's inputs from ``feed(ids)``,
    its first output against the model's last hidden state)."""
    onnx = onnx_module()
    from onnx.reference import ReferenceEvaluator

    checks = {}
    try:
        proto = onnx.load_from_string(data)
        # full_check: with strict shape inference, as ONNX Runtime reads the graph
        onnx.checker.check_model(proto, full_check=True)
    except Exception as exc:  # noqa: BLE001 - what onnx says of the file is the measurement
        checks["onnx_model_valid"] = {
            "ok": False,
            "detail": "onnx does not load and check the %d-byte file: %s: %s"
            % (len(data), type(exc).__name__, str(exc)[:200]),
        }
        return checks
    opset = max((o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0)
    checks["onnx_model_valid"] = {
        "ok": True,
        "detail": "onnx's checker (full check) accepts the model (opset %d)" % opset,
    }
    dim = proto.graph.input[0].type.tensor_type.shape.dim[0]
    checks["batch_axis_dynamic"] = {
        "ok": bool(dim.dim_param),
        "detail": "the input's batch axis is %s"
        % ("named %r" % dim.dim_param if dim.dim_param else "fixed at %d" % dim.dim_value),
    }
    evaluator = ReferenceEvaluator(proto)
    for name, batch in (("matches_torch", BATCH), ("matches_torch_other_batch", OTHER_BATCH)):
        x = ids(batch)
        with torch.no_grad():
            want = Hidden(model)(x).numpy()
        try:
            got = evaluator.run(None, feed(x))[0]
            diff = float(abs(got - want).max()) if got.shape == want.shape else None
        except Exception as exc:  # noqa: BLE001 - the model refusing the batch is the measurement
            checks[name] = {
                "ok": False,
                "detail": "the ONNX model does not run a batch of %d: %s: %s"
                % (batch, type(exc).__name__, str(exc)[:200]),
            }
            continue
        checks[name] = {
            "ok": diff is not None and diff <= TOLERANCE,
            "detail": "batch of %d: ONNX output %s against torch's %s, largest difference %s (tolerance %g)"
            % (
                batch,
                tuple(got.shape),
                tuple(want.shape),
                "n/a" if diff is None else "%.2g" % diff,
                TOLERANCE,
            ),
        }
    return checks


def fp32_only(precision):
    if precision != "fp32":
        raise Unsupported("the export is of the fp32 model: the error does not depend on precision")


def baseline(device, precision):
    """The sdpa model exported at opset 11: the exporter refuses the attention."""
    fp32_only(precision)
    model = bert("sdpa")
    return checked(export(model, TUTORIAL_OPSET), model)


def baseline_default_exporter(device, precision):
    """The same call with the release's own exporter, as a user makes it:
    ``torch.onnx.export(model, (ids,), path, opset_version=11, dynamic_axes=...)``, no
    ``dynamo`` argument (the TorchScript exporter before torch 2.9, the dynamo exporter
    from 2.9, which needs onnxscript); besides the file's checks, whether it is written at
    the opset asked for."""
    fp32_only(precision)
    model = bert("sdpa")
    onnx = onnx_module()
    folder = tempfile.mkdtemp(prefix="onnx-export-")
    try:
        path = os.path.join(folder, "model.onnx")
        torch.onnx.export(
            Hidden(model),
            (ids(BATCH),),
            path,
            opset_version=TUTORIAL_OPSET,
            input_names=["ids"],
            output_names=["hidden"],
            dynamic_axes={
                "ids": {0: "batch", 1: "sequence"},
                "hidden": {0: "batch", 1: "sequence"},
            },
        )
        try:  # the weights may be beside it (the dynamo exporter's external data)
            data = onnx.load(path).SerializeToString()
        except Exception:  # noqa: BLE001 - what onnx says of the file is for checked()
            with open(path, "rb") as f:
                data = f.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    checks = checked(data, model)
    checks["opset_as_asked"] = opset_as_asked(data, TUTORIAL_OPSET)
    return checks


def opset_as_asked(data, asked):
    """The file ``data`` is written at the opset ``asked`` for."""
    onnx = onnx_module()
    try:
        proto = onnx.load_from_string(data)
        written = max(
            (o.version for o in proto.opset_import if o.domain in ("", "ai.onnx")), default=0
        )
    except Exception as exc:  # noqa: BLE001 - onnx_model_valid already says what onnx said
        written, why = None, "%s: %s" % (type(exc).__name__, str(exc)[:100])
    return {
        "ok": written == asked,
        "detail": "asked opset %d, the file is written at %s"
        % (asked, written if written is not None else "no opset (%s)" % why),
    }


def workaround2_opset_for_architecture(device, precision):
    """The sensible reading: the same model, the opset raised from 11 until the exporter
    supports every operator of the architecture (the exporter names the opset it needs)."""
    fp32_only(precision)
    model = bert("sdpa")
    data, refused = lowest_opset_export(model)
    checks = checked(data, model)
    checks["onnx_model_valid"]["detail"] += "; refused at opset %s" % (", ".join(refused) or "none")
    return checks


def workaround2_literal_architecture_for_opset(device, precision):
    """The literal reading ("check the architecture's compatibility with the opset"): keep
    opset 11 and build the model with an attention the opset has (eager: matmul and
    softmax)."""
    fp32_only(precision)
    model = bert("eager")
    return checked(export(model, TUTORIAL_OPSET), model)


def workaround1_optimum_cli(device, precision):
    """The record's command, on the baseline's model saved to a folder (save_pretrained):
    ``optimum-cli export onnx --model FOLDER --task feature-extraction OUT``; optimum needs
    the task named for a local folder (it infers it only for a Hub name), and chooses the
    opset itself."""
    fp32_only(precision)
    model = bert("sdpa")
    cli = os.path.join(os.path.dirname(sys.executable), "optimum-cli")
    if not os.path.exists(cli):  # the harness installs it (entry.yaml requires)
        raise Unsupported("optimum-cli is not installed beside %s" % sys.executable)
    folder = tempfile.mkdtemp(prefix="onnx-export-")
    try:
        model.save_pretrained(os.path.join(folder, "model"))
        out = subprocess.run(
            [
                cli,
                "export",
                "onnx",
                "--model",
                os.path.join(folder, "model"),
                "--task",
                "feature-extraction",
                os.path.join(folder, "onnx"),
            ],
            capture_output=True,
            text=True,
            timeout=600,
        )
        written = os.path.join(folder, "onnx", "model.onnx")
        if out.returncode != 0:
            # optimum's own failure is the workaround's: its last words are the measurement
            last = [line for line in out.stderr.splitlines() if line.strip()][-1:] or [
                "(no output)"
            ]
            raise RuntimeError("optimum-cli export onnx exited %d: %s" % (out.returncode, last[0]))
        with open(written, "rb") as f:
            data = f.read()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return checked(data, model, feed=feed_transformers)


def deadend1_pickle(device, precision):
    """Pickle the model (torch.save of the whole module) instead of exporting it: a file
    onnx cannot read."""
    fp32_only(precision)
    model = bert("sdpa")
    buffer = io.BytesIO()
    torch.save(model, buffer)
    return checked(buffer.getvalue(), model)


def deadend2_no_dynamic_axes(device, precision):
    """Export without dynamic axes (at the opset the model needs): the file holds the
    traced batch size only."""
    fp32_only(precision)
    model = bert("sdpa")
    data, _ = lowest_opset_export(model, dynamic=False)
    return checked(data, model)


def control(device, precision):
    """The same export of a BERT whose attention opset 11 has (eager), with dynamic axes."""
    fp32_only(precision)
    model = bert("eager")
    return checked(export(model, TUTORIAL_OPSET), model)


VARIANTS = {
    "baseline": baseline,
    "baseline-default-exporter": baseline_default_exporter,
    "workaround2-opset-for-architecture": workaround2_opset_for_architecture,
    "workaround2-literal-architecture-for-opset": workaround2_literal_architecture_for_opset,
    "workaround1-optimum-cli": workaround1_optimum_cli,
    "deadend1-pickle": deadend1_pickle,
    "deadend2-no-dynamic-axes": deadend2_no_dynamic_axes,
    "control": control,
}
