"""Raw 64-bit random words of a numpy Generator, drawn inside compiled (numba) kernels.

The safe samplers turn raw words into reports by exact integer and float steps (grid.py,
discrete_laplace.py, discrete_gaussian.py). Their numpy versions drew the words in batches
(`bit_generator.random_raw(n)`, `random(n)`) and spent ~20 array passes on the transform; the
kernels draw each word where it is needed, in the SAME order as those batches, so the reports are
bit-identical for the same Generator state (tests/test_compiled_samplers.py).

A word is the bit generator's `next_uint64`, called through numpy's documented ctypes interface
(`BitGenerator.ctypes`: the C function pointer and the state address). For PCG64 (numpy's
default), PCG64DXSM, Philox and SFC64, `random_raw` and `random()` are that same word (random() =
(word >> 11) 2^-53). MT19937's `random_raw` returns 32-bit words, which the numpy samplers used
as if they were 64 bits (a dither with a zero half, an alias column always 0: a wrong law); the
kernels take full 64-bit words from every bit generator, so that bug is gone (docs/decisions.md).

For PCG64 (numpy's default) the kernels compute the word inline instead (`_pcg64_step`, numpy's
step and output; `draw_words` keeps the state in registers: ~2.0 ns per word against ~2.6 ns
through the pointer); every other bit generator goes through the pointer.

`handles(rngs)` packs (function pointer, state address, is-PCG64) per Generator; `locked(rngs)` holds their
locks while a kernel (compiled with nogil) advances their states, as numpy's own methods do.
`kernel` marks the kernels of ldpfed.mechanisms; `compiled()` compiles them on first use.
"""

from __future__ import annotations

import ctypes
import sys
import threading
from contextlib import ExitStack, contextmanager
from functools import lru_cache

import numpy as np

UNIT = 2.0**-53  # a 53-bit uniform is (word >> 11) * 2^-53, exactly numpy's Generator.random()
_KERNELS: dict[int, tuple] = {}  # id(function) -> (function, inline option)
_COMPILING = threading.Lock()


def kernel(function=None, *, inline: bool = False):
    """Marks a module-level function as a compiled kernel. It is compiled (numba, nogil, cached on
    disk, no fastmath) by `compiled()`, on the first sampling call of a process: importing
    ldpfed.mechanisms does not import numba (~0.4 s), as the predictor's data pass does not."""

    def mark(function):
        _KERNELS[id(function)] = (function, "always" if inline else "never")
        return function

    return mark if function is None else mark(function)


def _call_next_typing(typingctx, function, state):
    """next_uint64(state) through a C function pointer given as an integer address (an
    llvmlite intrinsic, made by `compiled`)."""
    from llvmlite import ir
    from numba import types

    def codegen(context, builder, sig, args):
        address, state_address = args
        byte_pointer = ir.IntType(8).as_pointer()
        function_type = ir.FunctionType(ir.IntType(64), [byte_pointer])
        pointer = builder.inttoptr(address, function_type.as_pointer())
        return builder.call(pointer, [builder.inttoptr(state_address, byte_pointer)])

    return types.uint64(types.uintp, types.uintp), codegen


PCG64_MULTIPLIER = (2549297995355413924 << 64) + 4865540595714422341  # PCG_DEFAULT_MULTIPLIER_128


def _pcg64_step_typing(typingctx, low, high, increment_low, increment_high):
    """One step of numpy's PCG64 on a state held in registers (numpy/random/src/pcg64/pcg64.h,
    pcg_setseq_128_xsl_rr_64_random_r; O'Neill 2014, PCG-XSL-RR 128/64): state = state * M + inc
    (mod 2^128), word = rotr64(high ^ low, state >> 122) of the NEW state. Returns (new low, new
    high, word); 128-bit halves as uint64."""
    from llvmlite import ir
    from numba import types

    def codegen(context, builder, sig, args):
        i64, i128 = ir.IntType(64), ir.IntType(128)

        def joined(low, high):
            high = builder.shl(builder.zext(high, i128), ir.Constant(i128, 64))
            return builder.or_(high, builder.zext(low, i128))

        state = builder.mul(joined(*args[:2]), ir.Constant(i128, PCG64_MULTIPLIER))
        state = builder.add(state, joined(*args[2:]))
        low, high = builder.trunc(state, i64), builder.trunc(builder.lshr(state, ir.Constant(i128, 64)), i64)
        rotation = builder.lshr(high, ir.Constant(i64, 58))
        left = builder.and_(builder.sub(ir.Constant(i64, 64), rotation), ir.Constant(i64, 63))
        folded = builder.xor(high, low)
        word = builder.or_(builder.lshr(folded, rotation), builder.shl(folded, left))  # one ror
        return context.make_tuple(builder, sig.return_type, [low, high, word])

    return types.UniTuple(types.uint64, 3)(types.uint64, types.uint64, types.uint64, types.uint64), codegen


def _word_at_typing(typingctx, address, index):
    """The uint64 at address + 8 index."""
    from llvmlite import ir
    from numba import types

    def codegen(context, builder, sig, args):
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        return builder.load(builder.gep(pointer, [args[1]]))

    return types.uint64(types.uint64, types.intp), codegen


def _set_word_at_typing(typingctx, address, index, value):
    """Stores the uint64 `value` at address + 8 index."""
    from llvmlite import ir
    from numba import types

    def codegen(context, builder, sig, args):
        pointer = builder.inttoptr(args[0], ir.IntType(64).as_pointer())
        builder.store(args[2], builder.gep(pointer, [args[1]]))
        return context.get_dummy_value()

    return types.none(types.uint64, types.intp, types.uint64), codegen


def compiled() -> bool:
    """Imports numba and swaps every `kernel` for its compiled dispatcher, wherever a kernel
    module holds it (kernels call each other by those names). Call before a kernel; once per
    process (threads wait for the first)."""
    with _COMPILING:
        return _swap_in_dispatchers()


@lru_cache(maxsize=1)
def _swap_in_dispatchers() -> bool:
    import numba
    from numba.extending import intrinsic

    globals()["_call_next"] = intrinsic(_call_next_typing)
    for name in ("_pcg64_step", "_word_at", "_set_word_at"):
        globals()[name] = intrinsic(globals()[name + "_typing"])
    dispatchers = {
        key: (function, numba.njit(cache=True, nogil=True, inline=inline)(function))
        for key, (function, inline) in _KERNELS.items()
    }
    for module in {sys.modules[function.__module__] for function, _ in dispatchers.values()}:
        for name, value in list(vars(module).items()):
            found = dispatchers.get(id(value))
            if found is not None and found[0] is value:
                setattr(module, name, found[1])
    return True


def _call_next(function, state):  # replaced by the intrinsic in `compiled`
    raise RuntimeError("call ldpfed.samplers.words.compiled() before a kernel")


_pcg64_step = _word_at = _set_word_at = _call_next  # likewise


@kernel(inline=True)
def next_word(handle):
    """The next raw 64-bit word of the Generator behind `handle` (a row of `handles`)."""
    if handle[2]:  # PCG64, inline (as in draw_words)
        pcg = _word_at(handle[1], 0)
        low, high, word = _pcg64_step(_word_at(pcg, 0), _word_at(pcg, 1), _word_at(pcg, 2), _word_at(pcg, 3))
        _set_word_at(pcg, 0, low)
        _set_word_at(pcg, 1, high)
        return word
    return _call_next(handle[0], handle[1])


@kernel
def draw_words(handle, words, count) -> None:
    """words[:count] = the next `count` raw words, in order. A loop of its own, so that the
    arithmetic on the words runs in loops free of calls (a call through the pointer clobbers the
    vector registers and blocks vectorization)."""
    if handle[2]:  # PCG64, inline: numpy's `pcg64_state` points to {uint128 state, inc} (test)
        pcg = _word_at(handle[1], 0)  # the buffered uint32 after that pointer is left alone
        low, high = _word_at(pcg, 0), _word_at(pcg, 1)
        increment_low, increment_high = _word_at(pcg, 2), _word_at(pcg, 3)
        for i in range(count):  # the state stays in registers
            low, high, words[i] = _pcg64_step(low, high, increment_low, increment_high)
        _set_word_at(pcg, 0, low)
        _set_word_at(pcg, 1, high)
        return
    for i in range(count):
        words[i] = next_word(handle)


@kernel
def redraw_at_or_above(handle, values, count, limit, shift, scratch) -> None:
    """Rejection sampling of values[:count] (uint64) below `limit`: each value >= limit is drawn
    again as (fresh word >> shift), one word per rejected index in index order, pass after pass
    (the numpy samplers' `bad = bad[values[bad] >= limit]` loops). `scratch`: int64, >= count."""
    rejected = 0
    for j in range(count):  # branch-free: a rejection is not predictable (28% in Laplace's table)
        scratch[rejected] = j
        rejected += values[j] >= limit
    while rejected:
        still = 0
        for b in range(rejected):
            j = scratch[b]
            values[j] = next_word(handle) >> shift
            scratch[still] = j
            still += values[j] >= limit
        rejected = still


def handles(rngs) -> np.ndarray:
    """(len(rngs), 3) uintp: each Generator's next_uint64 address, state address, and 1 if its bit
    generator is numpy's PCG64 (drawn inline), else 0."""
    rows = np.empty((len(rngs), 3), dtype=np.uintp)
    for row, rng in zip(rows, rngs):  # a few attribute reads per Generator; no array op exists
        interface = rng.bit_generator.ctypes
        row[0] = ctypes.cast(interface.next_uint64, ctypes.c_void_p).value
        row[1] = interface.state_address
        row[2] = type(rng.bit_generator) is np.random.PCG64
    return rows


@contextmanager
def locked(rngs):
    """Hold the bit generators' locks (each once, even if a Generator is listed twice)."""
    with ExitStack() as stack:
        seen = set()
        for rng in rngs:
            generator = rng.bit_generator
            if id(generator) not in seen:
                seen.add(id(generator))
                stack.enter_context(generator.lock)
        yield
