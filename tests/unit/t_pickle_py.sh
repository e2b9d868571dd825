# pk_emit against the real Python and torch unpicklers.
#
# CPython pickles many kinds of objects with protocols 0..5; pk_reemit
# (pk_parse + pk_emit) turns each into protocol 2, and Python checks that:
#   - re-emitted in its own protocol (3, 4, 5: framing, MEMOIZE,
#     STACK_GLOBAL, sets, large strs and bytes outside frames), a source
#     comes back byte for byte;
#   - pickle.loads of the output equals the original (identity of shared
#     and recursive objects included);
#   - output of a protocol-2 source is byte-identical to the source;
#   - whatever torch's weights_only unpickler accepts in the source, it
#     accepts in the output, with the same result;
#   - torch.save files (state dicts, optimizer state, parameters, views of
#     one storage, several dtypes; pickle protocols 2 and 4) with data.pkl
#     replaced by the output load with torch.load (weights_only too, where
#     the source allowed it) to equal tensors, and the persistent-id stream
#     (storage keys, classes, locations, sizes) is unchanged.
# Skips (77) when $TORCH_PYTHON cannot import torch.
set -u
py=${TORCH_PYTHON:-/usr/bin/python3}
tool="${CKPT_BUILDDIR:-.}/tests/unit/pk_reemit"
[ -x "$tool" ] || { echo "pk_reemit not built: $tool"; exit 99; }
if ! "$py" -c 'import torch' >/dev/null 2>&1; then
	echo "SKIP: $py cannot import torch"
	exit 77
fi
exec "$py" - "$tool" <<'PYEOF'
import collections, io, math, pickle, subprocess, sys, zipfile
import torch
import torch._weights_only_unpickler as wo

tool = sys.argv[1]
failures = []
wo_checked = 0


def fail(msg):
    failures.append(msg)
    print('FAIL:', msg)


def reemit(data, proto=None):
    r = subprocess.run([tool] + (['-p', 'same'] if proto else []) + ['-', '-'], input=data, capture_output=True)
    if r.returncode:
        raise RuntimeError(r.stderr.decode().strip())
    return r.stdout


def weights_only(data):
    try:
        return True, wo.load(io.BytesIO(data))
    except Exception as e:  # the unpickler's refusals are plain exceptions
        return False, e


def same(a, b, seen=None):
    """Equality of types and values that also holds for NaN, tells -0.0
    from 0.0, keeps dict order and stops at recursive containers."""
    seen = set() if seen is None else seen
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a != a and b != b) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, (list, tuple, dict)):
        if (id(a), id(b)) in seen:
            return True
        seen.add((id(a), id(b)))
        if isinstance(a, dict):
            return (list(a.keys()) == list(b.keys()) and
                    all(same(a[k], b[k], seen) for k in a))
        return len(a) == len(b) and all(same(x, y, seen) for x, y in zip(a, b))
    return a == b


# --- plain Python objects, protocols 0..5 -------------------------------------
shared = [1, 2]
rec_list = []
rec_list.append(rec_list)
rec_dict = {}
rec_dict['self'] = rec_dict
rec_tuple_list = []
rec_tuple = (rec_tuple_list,)
rec_tuple_list.append(rec_tuple)
od = collections.OrderedDict(('k%d' % i, i) for i in range(1501))
od_meta = collections.OrderedDict(a=1)
od_meta.version = 3   # an attribute: BUILD after the items

objects = {
    'dict': {'a': 1, 'b': [1, 2, 3], 'c': (1, 2), 'd': {'x': None}},
    'ordered_dict': od,
    'ordered_dict_attr': od_meta,
    'nested': [[1, [2, [3, [4]]]], (5, (6,)), {}],
    'tuples': [(), (1,), (1, 2), (1, 2, 3), (1, 2, 3, 4), tuple(range(300))],
    'sets': [set(), {1, 2, 3}, frozenset(), frozenset({'a', 'b'}), {(1, 2)}],
    'bytes': [b'', b'abc', bytes(range(256)), bytearray(b'xy'), bytearray()],
    'ints': [0, 1, 255, 256, 65535, 65536, -1, -2**31, 2**31 - 1, 2**31, -2**31 - 1,
             2**63 - 1, 2**63, -2**63, -2**63 - 1, 2**64, 10**100, -10**300, 2**2100],
    'floats': [0.0, -0.0, 1.5, 1e300, -1e-300, float('inf'), -float('inf'), float('nan')],
    'scalars': [None, True, False],
    'unicode': ['', 'é ☃ 𝄞', 'a\nb\\c\x00d\r\x1a', 'x' * 300, '\ud800'],
    'big_dict': {i: str(i) for i in range(2500)},
    'dict_1000': {i: i for i in range(1000)},
    'list_1000': list(range(1000)),
    'list_2001': list(range(2001)),
    'key_kinds': {1: 'a', 2.5: 'b', (1, 'x'): 'c', None: 'd', b'k': 'e', -7: 'f'},
    'shared': [shared, shared, (shared, shared)],
    'recursive_list': rec_list,
    'recursive_dict': rec_dict,
    'recursive_tuple': rec_tuple,
    'large': ['y' * 70000, b'z' * 70000, bytearray(b'q' * 70000), ['a%d' % i for i in range(20000)]],
    'sets_big': [set(range(2500)), frozenset(range(1000)), set(range(1000))],
}

for name, obj in objects.items():
    for proto in range(6):
        src = pickle.dumps(obj, protocol=proto)
        try:
            out = reemit(src)
        except RuntimeError as e:
            fail('%s p%d: %s' % (name, proto, e))
            continue
        back = pickle.loads(out)
        if not same(back, obj):
            fail('%s p%d: loads() differs: %.200r' % (name, proto, back))
        if name == 'shared' and not (back[0] is back[1] and back[2][0] is back[0]):
            fail('%s p%d: sharing lost' % (name, proto))
        if name == 'recursive_tuple' and back[0][0] is not back:
            fail('%s p%d: recursion lost' % (name, proto))
        if name == 'ordered_dict_attr' and getattr(back, 'version', None) != 3:
            fail('%s p%d: attribute lost' % (name, proto))
        if proto == 2 and out != src:
            fail('%s: protocol-2 source not re-emitted byte for byte' % name)
        if proto >= 3:
            try:
                same_proto = reemit(src, proto)
            except RuntimeError as e:
                fail('%s p%d in its protocol: %s' % (name, proto, e))
            else:
                if same_proto != src:
                    fail('%s: protocol-%d source not re-emitted byte for byte' % (name, proto))
        ok_src, val_src = weights_only(src)
        if ok_src:
            wo_checked += 1
            ok_out, val_out = weights_only(out)
            if not ok_out:
                fail('%s p%d: weights_only refuses the output: %s' % (name, proto, val_out))
            elif not same(val_out, val_src):
                fail('%s p%d: weights_only loads a different value' % (name, proto))

# --- torch.save files ----------------------------------------------------------


class Stub(dict):
    """Stands for any class or function: accepts every call, item and state."""
    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def append(self, item):
        pass

    def extend(self, items):
        pass


stubs = {}


def pid_stream(data):
    """The persistent ids in order, with classes named module.name."""
    pids = []

    class U(pickle.Unpickler):
        def persistent_load(self, pid):
            pids.append(repr(pid))
            return None

        def find_class(self, module, name):
            if (module, name) not in stubs:
                stubs[module, name] = type(name, (Stub,), {'__module__': module})
            return stubs[module, name]

    U(io.BytesIO(data)).load()
    return pids


def replace_pickle(blob, new_pkl):
    src = zipfile.ZipFile(io.BytesIO(blob))
    out = io.BytesIO()
    with zipfile.ZipFile(out, 'w', zipfile.ZIP_STORED) as z:
        for info in src.infolist():
            data = new_pkl if info.filename.endswith('/data.pkl') else src.read(info)
            z.writestr(info.filename, data)
    return out.getvalue()


def load(blob, wo_flag):
    return torch.load(io.BytesIO(blob), weights_only=wo_flag)


def equal(a, b):
    if isinstance(a, torch.Tensor):
        return (isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and
                a.stride() == b.stride() and a.storage_offset() == b.storage_offset() and
                type(a) is type(b) and a.requires_grad == b.requires_grad and torch.equal(a, b))
    if isinstance(a, dict):
        return (type(a) is type(b) and list(a.keys()) == list(b.keys()) and
                all(equal(a[k], b[k]) for k in a) and
                getattr(a, '_metadata', None) == getattr(b, '_metadata', None))
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return same(a, b)


torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3), torch.nn.Linear(3, 2))
opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
model(torch.randn(5, 4)).sum().backward()
opt.step()
base = torch.arange(24, dtype=torch.float32)
files = {
    'state_dict': model.state_dict(),
    'optimizer': opt.state_dict(),
    'checkpoint': {'model': model.state_dict(), 'optim': opt.state_dict(), 'step': 7, 'loss': 0.25},
    'parameter': torch.nn.Parameter(torch.randn(3, 3)),
    'views': {'a': base, 'b': base[4:10], 'c': base.view(4, 6)[:, 1], 'd': base.view(4, 6).t()},
    'dtypes': {str(dt): torch.ones(3, dtype=dt) for dt in
               (torch.float16, torch.bfloat16, torch.float64, torch.int8, torch.uint8,
                torch.int16, torch.int32, torch.int64, torch.bool, torch.complex64)},
    'many': collections.OrderedDict(('layers.%d.w' % i, torch.full((2,), float(i)))
                                    for i in range(2500)),
}
for name, obj in files.items():
    for proto in (2, 4):
        buf = io.BytesIO()
        torch.save(obj, buf, pickle_protocol=proto)
        blob = buf.getvalue()
        src = [zipfile.ZipFile(io.BytesIO(blob)).read(n)
               for n in zipfile.ZipFile(io.BytesIO(blob)).namelist() if n.endswith('/data.pkl')][0]
        try:
            out = reemit(src)
        except RuntimeError as e:
            fail('%s p%d: %s' % (name, proto, e))
            continue
        if proto == 2 and out != src:
            fail('%s: data.pkl not re-emitted byte for byte' % name)
        if pid_stream(out) != pid_stream(src):
            fail('%s p%d: persistent ids differ' % (name, proto))
        new_blob = replace_pickle(blob, out)
        if not equal(load(new_blob, False), obj):
            fail('%s p%d: torch.load gives a different object' % (name, proto))
        try:
            load(replace_pickle(blob, src), True)
            src_wo = True
        except Exception:
            src_wo = False
        if src_wo:
            wo_checked += 1
            try:
                if not equal(load(new_blob, True), obj):
                    fail('%s p%d: weights_only load differs' % (name, proto))
            except Exception as e:
                fail('%s p%d: weights_only refuses the output: %s' % (name, proto, e))

# --- refusals come back as errors, not crashes ------------------------------------
for bad in (b'abc', b'\x80\x02h\x05.', b'\x80\x02X\xff\xff\xff\x7fab'):
    r = subprocess.run([tool, '-', '-'], input=bad, capture_output=True)
    if r.returncode != 1 or b'offset' not in r.stderr:
        fail('%r: exit %d, %r' % (bad, r.returncode, r.stderr))

print('%d objects x 6 protocols, %d torch files x 2 protocols, %d weights_only comparisons: '
      '%d failures' % (len(objects), len(files), wo_checked, len(failures)))
if not wo_checked:
    fail('no source was weights_only-loadable: the weights_only checks did not run')
sys.exit(1 if failures else 0)
PYEOF
