"""The shim conformance suite (CTS): the ABI of csrc/rlx_shim.h tested the
same way against every shim (host, cuda, metal), one file per concept, as
IREE's HAL CTS does. conftest.py parametrizes every test that takes the
`backend` fixture over the shims; backends.py says, in one table, what each
backend does not support and why."""
