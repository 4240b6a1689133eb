"""explain reads a bounded tail of what a person pastes or points at (issue 36, item 5):
regular files and stdin only, the last MAX_PASTE_BYTES, sanitised as stored records are."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from harness.cli.explain import MAX_PASTE_BYTES, MAX_STDIN_BYTES, read_file_tail, read_tail
from harness.errors import InputError

ERROR = "RuntimeError: Expected all tensors to be on the same device\n"


def test_a_large_file_is_read_from_its_end(tmp_path: Path) -> None:
    path = tmp_path / "paste.txt"
    path.write_text("noise line\n" * 200_000 + ERROR)
    text, note = read_file_tail(path)
    assert text.endswith(ERROR) and len(text.encode()) <= MAX_PASTE_BYTES
    assert not text.startswith("oise")  # the cut first line is dropped, not half kept
    assert note.startswith("read the last 32 KiB of 2,200,")
    small = tmp_path / "small.txt"
    small.write_text(ERROR)
    assert read_file_tail(small) == (ERROR, "")


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_what_may_never_end_is_refused(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = tmp_path / "fifo"
        os.mkfifo(path)  # reading it would block forever
    elif kind == "device":
        path = Path("/dev/zero")  # reading it whole grew to 24 GB
    else:
        path = tmp_path
    with pytest.raises(InputError, match="not a regular file"):
        read_file_tail(path)


def test_an_endless_stream_is_cut_and_its_tail_kept() -> None:
    class Zeros(io.RawIOBase):
        read_bytes = 0

        def readable(self) -> bool:
            return True

        def read(self, n: int = -1) -> bytes:
            self.read_bytes += n
            return b"\0" * n

    stream = Zeros()
    text, note = read_tail(stream)
    assert stream.read_bytes == MAX_STDIN_BYTES
    assert "stopped after 16 MiB" in note
    assert set(text) == {"\ufffd"} and len(text) == MAX_PASTE_BYTES  # NUL is not echoed raw


def test_controls_a_terminal_would_obey_are_not_echoed() -> None:
    raw = "RuntimeError: boom \x1b[31mred\x1b[0m \x9b31m \u202eevil\u202c \x00nul\n"
    text, _ = read_tail(io.BytesIO(raw.encode()))
    assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text
    assert "\x00" not in text and "\u202c" not in text
    assert text.startswith("RuntimeError: boom red ")
