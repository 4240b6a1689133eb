"""Reproducer: "transform compose received wrong input type"
(deadends/pytorch/transform-compose-error/pt2-linux).

A torchvision `transforms.Compose` whose transforms disagree with their input: `ToTensor`
given an image that is already a tensor, `Normalize` given a PIL image. Each variant applies
one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/transform-compose-error/pt2-linux). It needs torchvision (and
the Pillow it brings): where torchvision does not import, every variant is unsupported with
that reason (the harness's matrix installs torch and lightning only).

    python repro.py --list
    python repro.py --variant baseline-totensor-on-tensor --device cpu --precision fp32
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

# reprokit:begin (the shared helpers, repros/reprokit.py; `harness export` inlines them)
sys.path.insert(
    0, next(str(d) for d in Path(__file__).resolve().parents if (d / "reprokit.py").is_file())
)
from reprokit import Unsupported, check_variant, main  # noqa: E402

# reprokit:end


VARIANTS = {
    "baseline-totensor-on-tensor": "Compose([ToTensor(), Normalize]) given a uint8 image tensor",
    "baseline-normalize-on-pil": "Compose([Normalize, ToTensor()]) given a PIL image",
    "workaround1-pil-chain": "PIL -> Tensor: Compose([ToTensor(), Normalize]) given the PIL image",
    "workaround1-tensor-chain": "Tensor -> Tensor: Compose([ConvertImageDtype(float32), Normalize]) given the tensor",
    "workaround2-transforms-v2": "transforms.v2: Compose([ToImage(), ToDtype(float32, scale=True), Normalize]) given the tensor and the PIL image",
    "deadend1-numpy-between": "the tensor chain with a round trip through numpy between transforms, on a GPU image",
    "deadend2-no-transforms": "the augmenting pipeline (RandomHorizontalFlip, ConvertImageDtype, Normalize) removed: samples used as they are",
    "control-augmenting-pipeline": "Compose([RandomHorizontalFlip(p=0.5), ConvertImageDtype(float32), Normalize]) given the tensor",
}
NOT_WRITTEN = []

MEAN = [0.5, 0.4, 0.3]
STD = [0.2, 0.25, 0.3]
DRAWS = 16  # samples drawn through the augmenting pipeline


def import_torchvision():
    """torchvision's transforms and PIL's Image, or Unsupported naming what is missing."""
    try:
        import torchvision
        from PIL import Image
        from torchvision import transforms
    except ImportError as exc:
        raise Unsupported(
            "torchvision (with Pillow) does not import here, and every variant needs it: %s" % exc
        )
    return torchvision, transforms, Image


def image(device: str) -> torch.Tensor:
    """A 3x8x8 uint8 image tensor on ``device`` (run() makes the PIL image of its values)."""
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (3, 8, 8), dtype=torch.uint8, generator=g).to(device)


def reference(img: torch.Tensor) -> torch.Tensor:
    """What every correct pipeline returns: values scaled to [0, 1], then normalised."""
    x = img.float() / 255
    mean = torch.tensor(MEAN, device=img.device).view(3, 1, 1)
    std = torch.tensor(STD, device=img.device).view(3, 1, 1)
    return (x - mean) / std


def as_expected(out, want: torch.Tensor, what: str) -> dict:
    return {
        "ok": is_close(out, want),
        "detail": "%s: got %s; expected float32 %s with the values computed by hand"
        % (what, describe(out), tuple(want.shape)),
    }


def run(variant: str, device: str = "cpu", precision: str = "fp32") -> dict:
    check_variant(variant, VARIANTS, NOT_WRITTEN)
    if precision != "fp32":
        raise Unsupported("image transforms produce float32 here: run fp32 only")
    torchvision, T, Image = import_torchvision()
    img = image(device)
    pil = Image.fromarray(img.cpu().permute(1, 2, 0).numpy())
    want = reference(img)

    if variant == "baseline-totensor-on-tensor":
        out = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])(img)
        return {"pipeline_output": as_expected(out, want, "Compose on a tensor")}
    if variant == "baseline-normalize-on-pil":
        out = T.Compose([T.Normalize(MEAN, STD), T.ToTensor()])(pil)
        return {"pipeline_output": as_expected(out, want, "Compose on a PIL image")}
    if variant == "workaround1-pil-chain":
        out = T.Compose([T.ToTensor(), T.Normalize(MEAN, STD)])(pil)
        return {"pipeline_output": as_expected(out, want, "PIL -> Tensor chain")}
    if variant == "workaround1-tensor-chain":
        if not hasattr(T, "ConvertImageDtype"):
            raise Unsupported(
                "transforms.ConvertImageDtype is missing in torchvision %s"
                % torchvision.__version__
            )
        out = T.Compose([T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)])(img)
        return {"pipeline_output": as_expected(out, want, "Tensor -> Tensor chain")}
    if variant == "workaround2-transforms-v2":
        try:
            from torchvision.transforms import v2
        except ImportError as exc:
            raise Unsupported(
                "torchvision.transforms.v2 is missing in torchvision %s: %s"
                % (torchvision.__version__, exc)
            )
        if not (hasattr(v2, "ToImage") and hasattr(v2, "ToDtype")):
            raise Unsupported(
                "transforms.v2 has no ToImage/ToDtype in torchvision %s" % torchvision.__version__
            )
        chain = v2.Compose(
            [v2.ToImage(), v2.ToDtype(torch.float32, scale=True), v2.Normalize(MEAN, STD)]
        )
        return {
            "tensor_input": as_expected(chain(img), want, "v2 chain on a tensor"),
            "pil_input": as_expected(chain(pil), want, "v2 chain on a PIL image"),
        }
    if variant == "deadend1-numpy-between":
        if device != "cuda":
            raise Unsupported("losing the GPU needs an image on a GPU; this cell is %s" % device)
        if not hasattr(T, "ConvertImageDtype"):
            raise Unsupported(
                "transforms.ConvertImageDtype is missing in torchvision %s"
                % torchvision.__version__
            )
        x = img
        for t in (T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)):
            x = torch.from_numpy(t(x).cpu().numpy())  # numpy between every transform
        return {
            "pipeline_output": as_expected(x, want, "chain with numpy between transforms"),
            "stays_on_the_input_device": {
                "ok": x.device == img.device,
                "detail": "input on %s, output on %s" % (img.device, x.device),
            },
        }
    # the augmenting pipeline (control), or none at all (dead end 2: every transform removed)
    if not hasattr(T, "ConvertImageDtype"):
        raise Unsupported(
            "transforms.ConvertImageDtype is missing in torchvision %s" % torchvision.__version__
        )
    pipeline = T.Compose(
        [T.RandomHorizontalFlip(p=0.5), T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)]
    )
    if variant == "deadend2-no-transforms":
        pipeline = None
    torch.manual_seed(0)
    draws = [img if pipeline is None else pipeline(img) for _ in range(DRAWS)]
    flipped = [is_close(d, want.flip(-1)) for d in draws]
    plain = [is_close(d, want) for d in draws]
    return {
        "augmented": {
            "ok": any(flipped) and any(plain),
            "detail": "%d draws of one sample: %d flipped, %d as it is (normalised); %s"
            % (DRAWS, sum(flipped), sum(plain), describe(draws[0])),
        },
        "normalised": {
            "ok": all(f or q for f, q in zip(flipped, plain)),  # noqa: B905 (Python 3.7)
            "detail": "draws equal to the normalised sample or its flip: %d of %d"
            % (sum(f or q for f, q in zip(flipped, plain)), DRAWS),  # noqa: B905
        },
    }


def is_close(out, want: torch.Tensor) -> bool:
    return (
        isinstance(out, torch.Tensor)
        and out.dtype == torch.float32
        and tuple(out.shape) == tuple(want.shape)
        and bool(torch.allclose(out.to(want.device), want, atol=1e-5))
    )


def describe(out) -> str:
    if isinstance(out, torch.Tensor):
        return "%s %s on %s" % (out.dtype, tuple(out.shape), out.device)
    return type(out).__name__


if __name__ == "__main__":
    sys.exit(main(run, VARIANTS, __doc__, not_written=NOT_WRITTEN, default_precision="fp32"))
