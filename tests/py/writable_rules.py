"""Trainer-side steps of tests/integration/writable_rules.sh.

  hf SERIES_DIR NAME PLAIN_DIR [MARKER]
      writes an HF Trainer style checkpoint into SERIES_DIR/NAME/ through
      the mount (model.safetensors, optimizer.pt, scheduler.pt, then
      MARKER, default trainer_state.json, last), and the same files into
      PLAIN_DIR/NAME/.  MARKER "-" writes no marker; one file stays open
      while the others are written, so an idle commit cannot cut in.
  hf_late SERIES_DIR NAME PLAIN_DIR
      as hf, then rng_state.pth 0.2 s after the marker, as transformers
      before 4.3x did (the marker's grace must cover it).
  same SERVED_DIR PLAIN_DIR
      the same file names; torch files (.pt, .bin) load bit-exactly the
      same, every other file is byte-identical.
"""

import json
import os
import struct
import sys
import time

import torch

from deepcompare import assert_loads_same


def _safetensors(tensors):
    header, blobs, off = {}, [], 0
    for name, t in tensors.items():
        raw = t.contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(blobs)


def hf(series_dir, name, plain_dir, marker="trainer_state.json"):
    torch.manual_seed(10)
    model = torch.nn.Sequential(torch.nn.Linear(16, 16), torch.nn.Linear(16, 4))
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.StepLR(opt, 5)
    for _ in range(3):
        opt.zero_grad()
        model(torch.randn(4, 16)).square().sum().backward()
        opt.step()
        sched.step()
    state = json.dumps({"global_step": 10, "log_history": []}).encode()
    for top in (series_dir, plain_dir):
        d = os.path.join(top, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "training_args.bin"), "wb") as held:
            torch.save({"lr": 0.01}, held)
            with open(os.path.join(d, "model.safetensors"), "wb") as f:
                f.write(_safetensors(model.state_dict()))
            torch.save(opt.state_dict(), os.path.join(d, "optimizer.pt"))
            torch.save(sched.state_dict(), os.path.join(d, "scheduler.pt"))
        if marker != "-":
            with open(os.path.join(d, marker), "wb") as f:
                f.write(state)
    print("saved %s" % name)


def hf_late(series_dir, name, plain_dir):
    hf(series_dir, name, plain_dir)
    time.sleep(0.2)
    for top in (series_dir, plain_dir):
        torch.save({"cpu_rng_state": torch.get_rng_state()}, os.path.join(top, name, "rng_state.pth"))
    print("wrote rng_state.pth after the marker")


def same(served_dir, plain_dir):
    names = sorted(os.listdir(plain_dir))
    if sorted(os.listdir(served_dir)) != names:
        sys.exit("served files %s, written %s" % (sorted(os.listdir(served_dir)), names))
    for n in names:
        a, b = os.path.join(served_dir, n), os.path.join(plain_dir, n)
        if not n.endswith((".pt", ".bin")):
            with open(a, "rb") as fa, open(b, "rb") as fb:
                if fa.read() != fb.read():
                    sys.exit("%s: served bytes differ" % a)
        else:
            assert_loads_same(a, b, n)
    print("%s: %d files as written" % (served_dir, len(names)))


if __name__ == "__main__":
    cmds = {"hf": hf, "hf_late": hf_late, "same": same}
    sys.exit(cmds[sys.argv[1]](*sys.argv[2:]))
