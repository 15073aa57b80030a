"""Compressed bodies that inflate far past any limit, built in a fraction of a second.

`gzip.compress(b"\\0" * (1 << 30), 9)` takes 5-16 s and a 1 GiB buffer. A deflate stream
flushed with Z_FULL_FLUSH restarts from an empty dictionary, byte-aligned, so every 16 MiB of
zeros compresses to the same bytes: one chunk is compressed and repeated, and the gzip trailer
(CRC-32 and length mod 2^32) is computed over zeros one MiB at a time. The result is a valid
gzip member (the tests inflate it to the end to check): 1 GiB of zeros in about 1 MB.
"""

from __future__ import annotations

import functools
import gzip
import struct
import zlib

MiB = 1 << 20
_CHUNK = 16 * MiB


@functools.cache
def zeros_gzip(size: int, layers: int = 1) -> bytes:
    """`size` zero bytes (a multiple of 16 MiB) in `layers` layers of gzip."""
    if size % _CHUNK:
        raise ValueError("size must be a multiple of 16 MiB")
    deflate = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = deflate.compress(bytes(_CHUNK)) + deflate.flush(zlib.Z_FULL_FLUSH)
    end = deflate.flush(zlib.Z_FINISH)
    crc = 0
    zero_mib = bytes(MiB)
    for _ in range(size // MiB):
        crc = zlib.crc32(zero_mib, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff"
    body = header + block * (size // _CHUNK) + end + struct.pack("<II", crc, size & 0xFFFFFFFF)
    for _ in range(layers - 1):
        body = gzip.compress(body, compresslevel=9)
    return body
