"""The .pxd is a real C-level API: build a tiny Cython extension that
cimports rlx._core and runs a compiled executable without the GIL (and
reads the ThunkTable it was made from at the C level)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np

import rlx

EXTENSION = textwrap.dedent("""
    # cython: language_level=3
    from libc.stdint cimport uintptr_t
    from rlx._core cimport Program, ThunkTable, program_run, program_error

    def table_length(ThunkTable table):
        '''The thunk count of a table, read from its C struct.'''
        return table.n_thunks

    def run_many(Program prog, x, y, int times):
        '''Run prog `times` times from C with the GIL released.'''
        cdef const unsigned char[::1] xin = x
        cdef unsigned char[::1] yout = y
        cdef const void *ins[1]
        cdef void *outs[1]
        cdef int status = 0, i
        ins[0] = &xin[0]
        outs[0] = &yout[0]
        with nogil:
            for i in range(times):
                status = program_run(prog, ins, outs)
                if status != 0:
                    break
        if status != 0:
            raise RuntimeError(program_error(prog).decode())
        return times
""")

SETUP = textwrap.dedent("""
    import sys
    from Cython.Build import cythonize
    from setuptools import Extension, setup
    import rlx
    setup(name="rlx_cimport_probe", script_args=["build_ext", "--inplace", "-q"],
          ext_modules=cythonize([Extension("rlx_cimport_probe", ["rlx_cimport_probe.pyx"],
                                           include_dirs=rlx.get_include())],
                                include_path=[str(__import__("pathlib").Path(rlx.__file__).parent.parent)],
                                quiet=True))
""")


def test_cimport_and_run_from_c(tmp_path: Path, rng):
    (tmp_path / "rlx_cimport_probe.pyx").write_text(EXTENSION)
    (tmp_path / "setup_probe.py").write_text(SETUP)
    # The probe must find the same rlx this test imports (installed or in-tree).
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path(rlx.__file__).parent.parent),
                                                        os.environ.get("PYTHONPATH", "")]))
    build = subprocess.run([sys.executable, "setup_probe.py"], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert build.returncode == 0, build.stdout + build.stderr

    g = rlx.Graph()
    x = g.input("x", (4, 8))
    g.set_outputs(y=g.softmax(g.gelu(x)))
    exe = rlx.compile(g)
    sys.path.insert(0, str(tmp_path))
    try:
        import rlx_cimport_probe
    finally:
        sys.path.remove(str(tmp_path))
    xv = rng.standard_normal((4, 8)).astype(np.float32)
    out = np.zeros((4, 8), np.float32)
    assert rlx_cimport_probe.run_many(exe.program, xv.view(np.uint8).ravel(), out.view(np.uint8).ravel(), 3) == 3
    np.testing.assert_allclose(out, rlx.run_reference(g, {"x": xv})["y"], rtol=1e-5, atol=1e-6)
    assert rlx_cimport_probe.table_length(exe.thunk_table) == exe.program.thunk_count == len(exe.thunks)
