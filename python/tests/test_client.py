import numpy as np
import pytest

import kvpool


def test_put_get_roundtrip_with_numpy_and_bytes(client):
    value = np.arange(1000, dtype=np.uint8)
    client.put("py/a", value)
    assert client.get("py/a") == value.tobytes()
    out = np.zeros(1000, dtype=np.uint8)
    assert client.get_into("py/a", out) == 1000
    assert np.array_equal(out, value)
    client.put("py/b", b"hello")
    assert client.exists("py/b")
    client.remove("py/b")
    assert not client.exists("py/b")


def test_errors_carry_the_status_code(client):
    with pytest.raises(kvpool.Error, match="NOT_FOUND"):
        client.get("py/missing")
    client.put("py/once", b"x")
    with pytest.raises(kvpool.Error, match="ALREADY_EXISTS"):
        client.put("py/once", b"y")


def test_non_contiguous_buffers_are_refused(client):
    with pytest.raises(ValueError):
        client.put("py/strided", np.arange(100, dtype=np.uint8)[::2])


class FakeTorchTensor:
    """Quacks like a CPU torch tensor: data_ptr(), numel(), element_size()."""

    def __init__(self, array):
        self.array = array
        self.device = type("Device", (), {"type": "cpu", "index": None})()

    def data_ptr(self):
        return self.array.ctypes.data

    def numel(self):
        return self.array.size

    def element_size(self):
        return self.array.itemsize

    def is_contiguous(self):
        return True


def test_data_ptr_objects_are_accepted(client):
    value = np.arange(64, dtype=np.float32)
    client.put("py/tensor", FakeTorchTensor(value))
    out = np.zeros(64, dtype=np.float32)
    client.get_into("py/tensor", FakeTorchTensor(out))
    assert np.array_equal(out, value)


def test_stat(client):
    s = client.stat()
    assert s["segments"] == 1
    assert s["capacity_bytes"] >= 64 << 20


def test_a_pool_of_two_parts_routes_stage_objects_to_their_part():
    with kvpool.LocalPool(memory_bytes=8 << 20, part=0) as p0, kvpool.LocalPool(memory_bytes=8 << 20, part=1) as p1:
        c = kvpool.Client(f"part0={p0.address},part1={p1.address}")
        c.put("ns/chunk/s0", b"stage zero")
        c.put("ns/chunk/s1", b"stage one")
        assert c.get("ns/chunk/s1") == b"stage one"
        parts = c.stat()["parts"]
        assert [p["objects"] for p in parts] == [1, 1]
        assert all(p["error"] is None for p in parts)
        with pytest.raises(kvpool.Error, match="listed as part 0 but its master serves part 1"):
            kvpool.Client(f"part0={p1.address},part1={p0.address}")
        with pytest.raises(kvpool.Error, match="listed twice"):
            kvpool.Client(f"part0={p0.address},part0={p1.address}")
