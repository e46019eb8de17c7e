"""``python -m astarpo`` with a stall planted in ``generate`` (see faults.py); for torchrun."""

import runpy

from faults import install_generate_fault

if __name__ == "__main__":
    install_generate_fault()
    runpy.run_module("astarpo", run_name="__main__", alter_sys=True)
