"""Image bytes for tests of pages that embed figures."""

PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)
"""A valid 1 x 1 PNG (one transparent pixel)."""
