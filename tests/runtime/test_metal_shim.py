"""Checks on the Metal shim that run without a Mac.

csrc/metal_shim.m (one translation unit with its section files,
csrc/metal/*.inc.m) cannot be compiled here, so these keep it honest by other
means: (1) every Objective-C selector, property, class, function and constant
it uses is listed in csrc/METAL_API.md with a reference project that makes the
same call (the table cannot drift from the code); (2) the MSL it compiles
(kernel_source("metal") and the shim's own embedded kernel) parses as C++
under tests/metal_stub/metal_stdlib, so typos, undeclared names and macro
leftovers fail in CI; (3) its API table fills rlx_shim.h's struct in order;
(4) rlx.shaders_cli.emit writes the source a target compiles; (5) the shim itself
is syntax- and type-checked by clang's Objective-C front end (-fsyntax-only
-fobjc-arc) against test-only declarations of the Apple API it uses
(tests/metal_stub/objc/), so a misspelled selector, a wrong argument count, an
argument of the wrong type or an API used below the minimum macOS fails in CI.
The behaviour of a loaded Metal shim is tested by the conformance suite, tests/cts/.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import in_ci
from shim_sources import expanded

from rlx.errors import RlxError
from rlx.runtime.shader_source import kernel_source
from rlx.shaders_cli import emit

ROOT = Path(__file__).resolve().parents[2]
SHIM = ROOT / "csrc" / "metal_shim.m"
TABLE = ROOT / "csrc" / "METAL_API.md"
HEADER = ROOT / "csrc" / "rlx_shim.h"
STUB = Path(__file__).resolve().parents[1] / "metal_stub"
OBJC_STUB = STUB / "objc"  # Foundation/, Metal/, MetalPerformanceShaders/ (test-only headers)


# ---- a small Objective-C scanner (enough for the shim's own style) -----------------------
def strip_comments_and_strings(src: str) -> str:
    """Comments become spaces, string and char literals become "" and ''
    (so MSL text inside C strings is not mistaken for code)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c, nxt = src[i], src[i + 1] if i + 1 < n else ""
        if c == "/" and nxt == "/":
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif c == "/" and nxt == "*":
            j = src.find("*/", i + 2)
            i = n if j < 0 else j + 2
            out.append(" ")
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _matching(src: str, start: int) -> int:
    """Index of the bracket closing the one at src[start], across nested ()[]{}."""
    pairs, stack = {"(": ")", "[": "]", "{": "}"}, []
    for i in range(start, len(src)):
        if src[i] in pairs:
            stack.append(pairs[src[i]])
        elif stack and src[i] == stack[-1]:
            stack.pop()
            if not stack:
                return i
    raise ValueError(f"unbalanced bracket at {start}")


def _flatten(body: str) -> str:
    """Nested (...) and [...] groups become '_' so only the top level is left."""
    out, i = [], 0
    while i < len(body):
        if body[i] in "([":
            i = _matching(body, i) + 1
            out.append("_")
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


_RECEIVER = r"[A-Za-z_]\w*(?:\s*(?:->|\.)\s*\w+)*"
_MESSAGE = re.compile(rf"\s*{_RECEIVER}\s+([A-Za-z_]\w*)\s*(:?)(.*)", re.S)


def message_selectors(code: str) -> set[str]:
    """Selectors of every [receiver selector:arg part:arg ...] message send.
    A subscript (a[i], entries[start + count]) has no 'receiver selector'
    shape at its top level, so it is skipped."""
    found = set()
    for i, ch in enumerate(code):
        if ch != "[":
            continue
        m = _MESSAGE.fullmatch(_flatten(code[i + 1:_matching(code, i)]))
        if not m:
            continue
        first, colon, rest = m.groups()
        if colon:
            found.add(first + ":" + "".join(p + ":" for p in re.findall(r"([A-Za-z_]\w*)\s*:", rest)))
        elif not rest.strip():
            found.add(first)
    return found


_OBJC_DECL = re.compile(r"(?:\bid\s*<\s*\w+\s*>|\b(?:NS|MTL|MPS)[A-Z]\w*\s*\*)\s*(?:__\w+\s+)?([A-Za-z_]\w*)")


def property_accesses(code: str) -> set[str]:
    """Dot-syntax properties used on Objective-C objects: on variables declared
    with an id<...> or NS/MTL/MPS pointer type (with the rest of the chain, e.g.
    err.localizedDescription.UTF8String), and on any parenthesised expression."""
    objc_vars = set(_OBJC_DECL.findall(code))
    found = set()
    for base, chain in re.findall(r"\b([A-Za-z_]\w*)((?:\s*\.\s*[A-Za-z_]\w*)+)", code):
        if base in objc_vars:
            found.update(re.findall(r"[A-Za-z_]\w*", chain))
    found.update(re.findall(r"\)\s*\.\s*([A-Za-z_]\w*)", code))
    return found


def framework_identifiers(code: str) -> set[str]:
    """Classes, types, functions and constants of Foundation, CoreFoundation, Metal and MPS."""
    return set(re.findall(r"\b((?:NS|CF|MTL|MPS)[A-Z]\w*)", code))


def table_symbols() -> dict[str, list[str]]:
    """First column of every row of csrc/METAL_API.md's tables -> the other cells."""
    rows = {}
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")] if line.lstrip().startswith("|") else []
        m = re.fullmatch(r"`([^`]+)`", cells[0]) if cells else None
        if m:
            rows[m.group(1)] = cells[1:]
    return rows


@pytest.fixture(scope="module")
def shim_source() -> str:
    """The shim as clang reads it: metal_shim.m with its section files in place."""
    return expanded(SHIM)


@pytest.fixture(scope="module")
def shim_code(shim_source) -> str:
    return strip_comments_and_strings(shim_source)


# ---- (1) the API table covers the shim ---------------------------------------------------------
def test_scanner_understands_the_shims_forms():
    code = strip_comments_and_strings("""
        id<MTLDevice> dev = MTLCreateSystemDefaultDevice(); // [ignored comment:x]
        x = [OBJ(id<MTLDevice>, d->mtl) newBufferWithLength:(NSUInteger)(a ? b : 1)
                                                     options:MTLResourceStorageModeShared];
        m = [[MPSMatrix alloc] initWithBuffer:OBJ(id<MTLBuffer>, b->mtl) offset:o descriptor:desc];
        if (cb->enc) [enc memoryBarrierWithScope:MTLBarrierScopeBuffers];
        return [x foo];
        s = "[not code:really]"; v = seen[(*n)++]; w = entries[start + count]; char model[96];
        NSError *err = nil; NSString *text = err.localizedDescription; q = text.UTF8String; r = info.name;
        u = dev.maxThreadsPerThreadgroup.width;
    """)
    assert message_selectors(code) == {"newBufferWithLength:options:", "alloc", "initWithBuffer:offset:descriptor:",
                                       "memoryBarrierWithScope:", "foo"}
    assert property_accesses(code) == {"localizedDescription", "UTF8String", "maxThreadsPerThreadgroup", "width"}
    assert {"MTLDevice", "MTLCreateSystemDefaultDevice", "NSUInteger", "MPSMatrix"} <= framework_identifiers(code)


def test_every_objc_call_in_the_shim_is_in_the_api_table(shim_code):
    table = table_symbols()
    used = {
        "selector": message_selectors(shim_code),
        "property": property_accesses(shim_code),
        "identifier": framework_identifiers(shim_code),
    }
    assert len(used["selector"]) > 30 and len(used["identifier"]) > 30, "the scanner found too little"
    missing = {kind: sorted(names - set(table)) for kind, names in used.items() if names - set(table)}
    assert not missing, f"add these to csrc/METAL_API.md (with a reference project): {missing}"


def test_every_table_row_names_a_reference_and_is_used(shim_code):
    table = table_symbols()
    used = message_selectors(shim_code) | property_accesses(shim_code) | framework_identifiers(shim_code)
    for name, cells in table.items():
        assert len(cells) >= 3 and cells[1] and cells[2], f"{name}: kind, reference and note are required"
    # Rows for Objective-C language features (@autoreleasepool, ...) are documentation only.
    stale = sorted(n for n in table if n not in used and not n.startswith(("@", "__")))
    assert not stale, f"METAL_API.md lists calls the shim no longer makes: {stale}"


def test_shim_declares_its_minimum_macos():
    head = SHIM.read_text()[:2500]
    assert re.search(r"Minimum macOS: 11\.0", head)
    setup = (ROOT / "setup.py").read_text()
    assert "-mmacosx-version-min=11.0" in setup and "CoreGraphics" in setup


# ---- (3) the API table matches rlx_shim.h ------------------------------------------------------
@pytest.mark.parametrize("shim_file,backend", [("metal_shim.m", "metal"), ("cuda/shim.c", "cuda")])
def test_api_table_fills_every_abi_entry_in_order(shim_file, backend):
    """The C shims' table is RLX_DEFINE_SHIM_API (csrc/rlx_shim_table.h): it
    must list every rlx_shim_api entry in the header's order, and the shim
    must define each of them as a function (no NULL stubs)."""
    header = HEADER.read_text()
    body = header[header.index("typedef struct rlx_shim_api {"):header.index("} rlx_shim_api;")]
    fields = re.findall(r"\(\s*\*\s*(\w+)\s*\)\s*\(", body)
    table = strip_comments_and_strings((HEADER.parent / "rlx_shim_table.h").read_text())
    init = table[table.index("rlx_shim_api kApi = {"):]
    init = init[init.index("{") + 1:init.index("};")].replace("\\", " ")
    entries = [e.strip() for e in init.split(",") if e.strip()]
    assert entries[:3] == ["RLX_SHIM_ABI_VERSION", "(uint32_t)sizeof(rlx_shim_api)", "backend_name"]
    assert entries[3:] == fields, "the table must list every rlx_shim_api entry, in the header's order"
    source = expanded(HEADER.parent / shim_file)  # the translation unit, its section files in place
    assert re.search(rf'^RLX_DEFINE_SHIM_API\("{backend}"\)', source, re.M), f"{shim_file} must define its table"
    code = strip_comments_and_strings(source)
    shared = table[:table.index("rlx_shim_api kApi = {")]  # entries the table defines for every C shim
    for name in fields:  # every entry is a real function of the shim, not a NULL stub
        assert (re.search(rf"^static [^;{{]*\b{name}\(", code, re.M)
                or re.search(rf"^\s*static [^;{{]*\b{name}\(", shared, re.M)), f"{name} is not defined in {shim_file}"


# ---- (2) the MSL parses ------------------------------------------------------------------------
def _gxx_syntax(tmp_path: Path, source: str, name: str = "k.metal") -> subprocess.CompletedProcess:
    path = tmp_path / name
    path.write_text(source)
    return subprocess.run(["g++", "-std=c++17", "-fsyntax-only", "-Wno-attributes", "-I", str(STUB), "-x", "c++",
                           str(path)], capture_output=True, text=True)


needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="g++ not installed")

USER_KERNEL = """
struct ScaleParams { uint n; float scale; float bias; uint pad; };
template <typename T>
RLX_KERNEL scale_bias(RLX_BUF(RLX_DEVICE const T *, x, 0), RLX_BUF(RLX_DEVICE T *, y, 1),
                      RLX_PARAMS(ScaleParams, p, 2) RLX_IDS) {
    RLX_FOR_RANGE(i, p->n) { y[i] = rlx_from_float<T>(rlx_to_float(x[i]) * p->scale + p->bias); }
}
RLX_INSTANTIATE(scale_bias, float, scale_bias_f32)
RLX_INSTANTIATE(scale_bias, half, scale_bias_f16)
"""


@needs_gxx
def test_metal_kernel_source_parses_as_cxx(tmp_path):
    for label, src in (("built-in", kernel_source("metal")), ("user", kernel_source("metal", USER_KERNEL))):
        r = _gxx_syntax(tmp_path, src)
        assert r.returncode == 0, f"{label} MSL does not parse:\n{r.stderr[-4000:]}"


@needs_gxx
def test_the_stub_still_rejects_mistakes(tmp_path):
    """The check is only worth something if the stub does not declare too much."""
    good = kernel_source("metal", USER_KERNEL)
    bad = {
        "undeclared name": "RLX_INLINE float f(float x) { return rlx_undeclared_helper(x); }",
        "typo in a builtin": "RLX_INLINE float f(float x) { return metal::precise::exq(x); }",
        "macro leftover": "RLX_INLINE float f(float x) { return RLX_NOT_A_MACRO(x); }",
        "C library call MSL lacks": "RLX_INLINE float f(float x) { return expf(x); }",
    }
    for label, line in bad.items():
        assert _gxx_syntax(tmp_path, good + "\n" + line + "\n").returncode != 0, f"{label} was not caught"


@needs_gxx
def test_explicit_instantiation_form_parses(tmp_path):
    src = ('#include <metal_stdlib>\nusing namespace metal;\n'
           'template <typename T>\n[[kernel]] void k(device T *x [[buffer(0)]], uint3 g [[thread_position_in_grid]])'
           ' { x[g.x] = T(1.0f); }\n'
           'template [[host_name("k_f32")]] [[kernel]] decltype(k<float>) k<float>;\n'
           'template [[host_name("k_f16")]] [[kernel]] decltype(k<half>) k<half>;\n')
    r = _gxx_syntax(tmp_path, src)
    assert r.returncode == 0, r.stderr


@needs_gxx
def test_the_shims_embedded_kernel_parses(tmp_path, shim_source):
    """kScaleSource (C = beta*C for k == 0) is MSL inside a C string literal."""
    text = shim_source
    m = re.search(r"kScaleSource\s*=\s*((?:\s*\"(?:[^\"\\]|\\.)*\")+);", text)
    assert m, "kScaleSource not found in the Metal shim"
    parts = re.findall(r"\"((?:[^\"\\]|\\.)*)\"", m.group(1))
    src = "".join(p.encode().decode("unicode_escape") for p in parts)
    assert "rlx_scale_c_f32" in src and "rlx_scale_c_f16" in src
    r = _gxx_syntax(tmp_path, src, "scale.metal")
    assert r.returncode == 0, r.stderr


# ---- (5) the Objective-C type-checks under clang ------------------------------------------------
# Warnings clang gives for a mistake ARC does not already reject (a selector of another
# protocol, an argument of the wrong protocol or enum type, an NSString format mismatch, an
# undeclared function, an API newer than the deployment target without @available) are errors.
OBJC_WARNINGS = ["-Wall", "-Wextra", "-Wenum-conversion", "-Wformat=2", "-Wundeclared-selector",
                 "-Wstrict-selector-match", "-Wunguarded-availability", "-Werror"]


@pytest.fixture(scope="module")
def clang_objc() -> list[str]:
    """clang's command line for the check, less the file. The target is macOS (so @available and
    the stubs' availability attributes mean what they do there) at the deployment target of
    setup.py; the C library headers the shim includes are the host's glibc ones. Clang predefines
    __nonnull as _Nonnull for Apple targets, which would keep glibc's <sys/cdefs.h> from defining
    its __nonnull(params) macro, hence -U__nonnull."""
    clang = shutil.which("clang")
    if clang is None:
        msg = ("clang is not installed: scripts/ensure_clang.sh (run by scripts/test.sh) installs it "
               "with apt-get; without it csrc/metal_shim.m is not type-checked (CI=true: a failure, not a skip)")
        if in_ci():
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    multiarch = subprocess.run([clang, "-print-multiarch"], capture_output=True, text=True).stdout.strip()
    arch = {"aarch64": "arm64"}.get(multiarch.split("-")[0], multiarch.split("-")[0]) if multiarch else "x86_64"
    macos = re.search(r"-mmacosx-version-min=([\d.]+)", (ROOT / "setup.py").read_text()).group(1)
    cmd = [clang, f"--target={arch}-apple-macos{macos}", "-fsyntax-only", "-fobjc-arc", "-fblocks",
           "-fobjc-exceptions", "-fno-color-diagnostics", "-U__nonnull", *OBJC_WARNINGS,
           "-I", str(OBJC_STUB), "-I", str(SHIM.parent)]
    if multiarch and (Path("/usr/include") / multiarch).is_dir():
        cmd[1:1] = ["-isystem", f"/usr/include/{multiarch}"]
    return cmd


def _clang_check(cmd: list[str], tmp_path: Path, source: str, *extra: str) -> subprocess.CompletedProcess:
    path = tmp_path / "metal_shim.m"
    path.write_text(source)
    return subprocess.run([*cmd, *extra, str(path)], capture_output=True, text=True)


def test_the_shim_type_checks_against_the_objc_stub(clang_objc, tmp_path):
    """The unmodified shim (a copy: includes, its section files too, resolve from -I alone)
    gives no error or warning."""
    r = _clang_check(clang_objc, tmp_path, SHIM.read_text())
    assert r.returncode == 0 and not r.stderr.strip(), f"clang rejects csrc/metal_shim.m:\n{r.stderr[-6000:]}"
    deps = subprocess.run([*(c for c in clang_objc if c != "-fsyntax-only"), "-M", str(SHIM)],
                          capture_output=True, text=True)
    for header in ("Foundation/Foundation.h", "Metal/Metal.h", "MetalPerformanceShaders/MetalPerformanceShaders.h"):
        assert str(OBJC_STUB / header) in deps.stdout, f"<{header}> did not resolve to the stub"
    for section in sorted((SHIM.parent / "metal").glob("*.inc.m")):
        assert str(section) in deps.stdout, f"{section.name} is not part of the shim's translation unit"


# (label, text in the shim, its replacement, what clang's message must mention)
OBJC_MISTAKES = [
    ("misspelled selector", "newBufferWithLength:(NSUInteger)", "newBufferWithLenght:(NSUInteger)",
     "newBufferWithLenght:options:"),
    ("argument left out", "[enc setBytes:cb->bytes[i] length:cb->nbytes[i] atIndex:i]",
     "[enc setBytes:cb->bytes[i] length:cb->nbytes[i]]", "setBytes:length:"),
    ("argument added", "[c setBarrier]", "[c setBarrier:YES]", "setBarrier:"),
    ("class selector sent to an instance", "[NSString stringWithUTF8String:tok + 2]",
     "[opts stringWithUTF8String:tok + 2]", "stringWithUTF8String:"),
    ("selector of another protocol", "[mcb waitUntilCompleted]", "[mcb endEncoding]", "endEncoding"),
    ("misspelled property", "desc.inheritBuffers = NO", "desc.inheritBufers = NO", "inheritBufers"),
    ("argument of another protocol", "encodeToCommandBuffer:OBJ(id<MTLCommandBuffer>, cb->cb)",
     "encodeToCommandBuffer:OBJ(id<MTLBuffer>, cb->cb)", "id<MTLBuffer>"),
    ("constant of another enum", "computeCommandEncoderWithDispatchType:MTLDispatchTypeConcurrent]",
     "computeCommandEncoderWithDispatchType:MTLBarrierScopeBuffers]", "MTLBarrierScope"),
    ("integer for a struct", "[m resetWithRange:NSMakeRange(0, capacity)]", "[m resetWithRange:capacity]",
     "NSRange"),
    ("misspelled function", "MPSSupportsMTLDevice(dev)", "MPSSupportsDevice(dev)", "MPSSupportsDevice"),
    ("format mismatch", '[NSString stringWithFormat:@"%s|%u", function, flags]',
     '[NSString stringWithFormat:@"%s|%s", function, flags]', "format specifies type"),
    ("macOS 15 API without @available", "if (@available(macOS 15.0, *)) opts.mathMode = MTLMathModeSafe;\n"
     "    else opts.fastMathEnabled = NO;", "opts.mathMode = MTLMathModeSafe;", "only available on macOS 15.0"),
    ("ARC: object pointer into a struct without a bridge", "#define KEEP(obj) ((void *)CFBridgingRetain(obj))",
     "#define KEEP(obj) ((void *)(obj))", "bridged cast"),
]


@pytest.mark.parametrize("label,old,new,expect", OBJC_MISTAKES, ids=[m[0] for m in OBJC_MISTAKES])
def test_the_objc_check_catches_mistakes(clang_objc, tmp_path, shim_source, label, old, new, expect):
    """Each mistake is planted in the expanded shim (so in whichever section file holds the line)."""
    source = shim_source
    assert old in source, f"{label}: {old!r} is no longer in the Metal shim (update this case)"
    r = _clang_check(clang_objc, tmp_path, source.replace(old, new, 1))
    assert r.returncode != 0, f"{label} was not caught"
    assert expect in r.stderr, f"{label}: clang failed, but not for the planted mistake:\n{r.stderr[-3000:]}"


def test_the_minimum_macos_is_needed(clang_objc, tmp_path):
    """At macOS 10.15 the ICB compute calls (11.0 in Apple's headers, as the shim's header says)
    are flagged: the availability check is live and the shim's minimum is not arbitrary."""
    cmd = [re.sub(r"macos[\d.]+$", "macos10.15", c) if c.startswith("--target=") else c for c in clang_objc]
    r = _clang_check(cmd, tmp_path, SHIM.read_text())
    assert r.returncode != 0
    for name in ("executeCommandsInBuffer:withRange:", "indirectComputeCommandAtIndex:",
                 "MTLIndirectCommandTypeConcurrentDispatch"):
        assert f"'{name}' is only available on macOS 11.0" in r.stderr, r.stderr[-3000:]


# Declared by the stub without being a name the shim writes: base classes and protocols, the
# types of the shim's arguments and results, and the NSNumber factory that boxing (@(...)) calls.
STUB_SUPPORT = {
    "NSObject", "NSCopying", "NSInteger", "NSRange", "NSDictionary", "CFTypeRef", "CFTimeInterval",
    "MTLResource", "MTLCommandEncoder", "MTLSize", "MTLResourceOptions", "MTLResourceUsage", "MTLGPUFamily",
    "MTLMathMode", "MTLPipelineOption", "MTLComputePipelineReflection", "MTLAutoreleasedComputePipelineReflection",
    "MTLCommandBufferStatus", "MTLDispatchType", "MTLBarrierScope", "MTLIndirectCommandType", "MPSKernel",
    "MPSMatrixBinaryKernel", "MPSDataTypeFloatBit", "numberWithUnsignedLong:",
}


def test_the_objc_stub_declares_only_what_the_shim_uses():
    """Every class, protocol, type, constant, function, selector and property in the stub is a
    row of csrc/METAL_API.md (so, used by the shim) or in STUB_SUPPORT."""
    declared = set()
    for header in sorted(OBJC_STUB.rglob("*.h")):
        code = strip_comments_and_strings(header.read_text())
        assert "TEST-ONLY" in header.read_text()[:200], f"{header.name} must say it is a test-only stand-in"
        declared |= framework_identifiers(code)
        for decl in re.findall(r"^\s*[-+]\s*\([^;]*;", code, re.M):
            parts = re.findall(r"(\w+)\s*:\s*\(", decl)
            declared.add("".join(p + ":" for p in parts) if parts else re.match(r"[-+]\s*\([^)]*\)\s*(\w+)",
                                                                               decl.strip()).group(1))
        declared |= set(re.findall(r"@property\b[^;]*?(\w+)\s*(?:RLX_STUB_\w+\([^)]*\))?\s*;", code))
    extra = sorted(declared - set(table_symbols()) - STUB_SUPPORT)
    assert not extra, f"tests/metal_stub/objc declares names the shim does not use: {extra}"


# ---- (4) rlx shaders --emit ------------------------------------------------------------------
@pytest.mark.parametrize("target,suffix", [("metal", ".metal"), ("cuda", ".cu"), ("cpu", ".cpp")])
def test_emit_writes_the_targets_source(tmp_path, target, suffix):
    out = emit(target, tmp_path / "new" / "dir")
    assert out == tmp_path / "new" / "dir" / f"rlx_kernels{suffix}"
    assert out.read_text() == kernel_source(target)
    assert emit(target, tmp_path / "new" / "dir") == out  # overwrites in place


def test_emit_rejects_unknown_targets(tmp_path):
    with pytest.raises(RlxError, match="vulkan"):
        emit("vulkan", tmp_path)
    assert not list(tmp_path.iterdir())
