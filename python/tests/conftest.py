import pytest

kvpool = pytest.importorskip("kvpool", reason="build the kvpool_python target and put its folder on PYTHONPATH")


@pytest.fixture(scope="module")
def pool():
    with kvpool.LocalPool(memory_bytes=64 << 20) as p:
        yield p


@pytest.fixture
def client(pool):
    return kvpool.Client(pool.address)
