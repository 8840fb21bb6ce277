"""The inline PCG64 word (ldpfed.samplers.words._pcg64_next) is numpy's next_uint64: the same
words and the same final bit-generator state, the buffered uint32 included."""

import numpy as np
import pytest

from ldpfed.samplers import words


@pytest.mark.parametrize("count", [0, 1, 1000])
@pytest.mark.parametrize("buffered", [False, True])
def test_inline_pcg64_equals_numpy(count, buffered):
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(20261123)))
    rng.random(3)
    if buffered:  # a uint32 draw leaves the other half buffered (has_uint32 = 1), untouched by next_uint64
        rng.integers(0, 2**32, dtype=np.uint32)
    copy = np.random.Generator(np.random.PCG64())
    copy.bit_generator.state = rng.bit_generator.state
    handle = words.handles([rng])[0]
    assert handle[2] == 1
    words.compiled()
    got = np.zeros(count, dtype=np.uint64)
    with words.locked([rng]):
        words.draw_words(handle, got, count)  # the state in registers
        single = [words.next_word(handle) for _ in range(3)]  # the state in memory, word by word
    want = copy.bit_generator.random_raw(count + 3)
    assert np.array_equal(got, want[:count]) and single == list(want[count:])
    assert rng.bit_generator.state == copy.bit_generator.state
    assert rng.integers(0, 2**32, dtype=np.uint32) == copy.integers(0, 2**32, dtype=np.uint32)


def test_other_bit_generators_go_through_the_pointer():
    kinds = (np.random.PCG64DXSM, np.random.Philox, np.random.SFC64, np.random.MT19937)
    others = [np.random.Generator(bit_generator(1)) for bit_generator in kinds]
    assert not words.handles(others)[:, 2].any()
