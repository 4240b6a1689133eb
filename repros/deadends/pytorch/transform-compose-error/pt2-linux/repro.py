"""Reproducer: "transform compose received wrong input type"
(deadends/pytorch/transform-compose-error/pt2-linux).

A torchvision `transforms.Compose` whose transforms disagree with their input: `ToTensor`
given an image that is already a tensor, `Normalize` given a PIL image. Each variant applies
one workaround or dead end of the knowledge-base entry
(https://deadends.dev/pytorch/transform-compose-error/pt2-linux). It needs torchvision (and
the Pillow it brings): where torchvision does not import, every variant is unsupported with
that reason (the harness's matrix installs torch and lightning only). Image transforms
produce float32 here: entry.yaml runs fp32 only.
"""

from __future__ import annotations

import torch
from reprokit import Unsupported

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
    """A 3x8x8 uint8 image tensor on ``device`` (prepared() makes the PIL image of its values)."""
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


def prepared(device):
    """torchvision's transforms, the image as a tensor and as a PIL image, and the expected
    result."""
    torchvision, T, Image = import_torchvision()
    img = image(device)
    pil = Image.fromarray(img.cpu().permute(1, 2, 0).numpy())
    return torchvision, T, img, pil, reference(img)


def needs_convert_image_dtype(torchvision, T) -> None:
    if not hasattr(T, "ConvertImageDtype"):
        raise Unsupported(
            "transforms.ConvertImageDtype is missing in torchvision %s" % torchvision.__version__
        )


def composed(device, transforms, on_pil, what) -> dict:
    """Compose(transforms(T)) given the image as a PIL image (``on_pil``) or as a tensor."""
    _, T, img, pil, want = prepared(device)
    out = T.Compose(transforms(T))(pil if on_pil else img)
    return {"pipeline_output": as_expected(out, want, what)}


def baseline_totensor_on_tensor(device, precision):
    return composed(
        device, lambda T: [T.ToTensor(), T.Normalize(MEAN, STD)], False, "Compose on a tensor"
    )


def baseline_normalize_on_pil(device, precision):
    return composed(
        device, lambda T: [T.Normalize(MEAN, STD), T.ToTensor()], True, "Compose on a PIL image"
    )


def workaround1_pil_chain(device, precision):
    return composed(
        device, lambda T: [T.ToTensor(), T.Normalize(MEAN, STD)], True, "PIL -> Tensor chain"
    )


def workaround1_tensor_chain(device, precision):
    torchvision, T, img, _, want = prepared(device)
    needs_convert_image_dtype(torchvision, T)
    out = T.Compose([T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)])(img)
    return {"pipeline_output": as_expected(out, want, "Tensor -> Tensor chain")}


def workaround2_transforms_v2(device, precision):
    torchvision, _, img, pil, want = prepared(device)
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


def deadend1_numpy_between(device, precision):
    # losing the GPU needs an image on a GPU: entry.yaml runs it in CUDA cells only
    torchvision, T, img, _, want = prepared(device)
    needs_convert_image_dtype(torchvision, T)
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


def augmented(device, transforms=True) -> dict:
    """DRAWS samples through the augmenting pipeline (or with every transform removed)."""
    torchvision, T, img, _, want = prepared(device)
    needs_convert_image_dtype(torchvision, T)
    pipeline = T.Compose(
        [T.RandomHorizontalFlip(p=0.5), T.ConvertImageDtype(torch.float32), T.Normalize(MEAN, STD)]
    )
    torch.manual_seed(0)
    draws = [pipeline(img) if transforms else img for _ in range(DRAWS)]
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


def deadend2_no_transforms(device, precision):
    return augmented(device, transforms=False)


def control_augmenting_pipeline(device, precision):
    return augmented(device)


VARIANTS = {
    "baseline-totensor-on-tensor": baseline_totensor_on_tensor,
    "baseline-normalize-on-pil": baseline_normalize_on_pil,
    "workaround1-pil-chain": workaround1_pil_chain,
    "workaround1-tensor-chain": workaround1_tensor_chain,
    "workaround2-transforms-v2": workaround2_transforms_v2,
    "deadend1-numpy-between": deadend1_numpy_between,
    "deadend2-no-transforms": deadend2_no_transforms,
    "control-augmenting-pipeline": control_augmenting_pipeline,
}
