"""The training data: real digits from scikit-learn's wheel, mnist.npz from the shared folder."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from tfmw_trainer.data import DataError, ExampleStream, load, worker_share


def test_digits_are_the_real_8x8_set_split_into_disjoint_train_and_test(tmp_path: Path) -> None:
    digits = load("digits", tmp_path, seed=7)
    assert (digits.x_train.shape, digits.x_test.shape, digits.classes) == ((1438, 64), (359, 64), 10)
    assert digits.x_train.min() >= 0.0 and digits.x_train.max() == 1.0
    assert sorted(set(digits.y_train.tolist())) == list(range(10))
    train_rows = {row.tobytes() for row in digits.x_train}
    assert sum(row.tobytes() in train_rows for row in digits.x_test) < 10  # a few images repeat in the set


def test_every_worker_loads_the_same_split(tmp_path: Path) -> None:
    first, second = load("digits", tmp_path, seed=7), load("digits", tmp_path, seed=7)
    assert np.array_equal(first.y_test, second.y_test)


def write_mnist(path: Path, train: int = 60, test: int = 10) -> None:
    rng = np.random.default_rng(0)
    np.savez(
        path,
        x_train=rng.integers(0, 256, (train, 28, 28), dtype=np.uint8),
        y_train=rng.integers(0, 10, train, dtype=np.uint8),
        x_test=rng.integers(0, 256, (test, 28, 28), dtype=np.uint8),
        y_test=rng.integers(0, 10, test, dtype=np.uint8),
    )


def test_mnist_is_read_from_the_job_folder_when_the_path_is_relative(tmp_path: Path) -> None:
    write_mnist(tmp_path / "mnist.npz")
    mnist = load("mnist.npz", tmp_path, seed=7)
    assert (mnist.x_train.shape, mnist.x_test.shape, mnist.classes) == ((60, 784), (10, 784), 10)
    assert mnist.x_train.max() <= 1.0 and mnist.name == "mnist"
    assert load(str(tmp_path / "mnist.npz"), Path("/nowhere"), seed=7).features == 784


def test_a_file_that_is_not_mnist_is_refused_with_what_it_lacks(tmp_path: Path) -> None:
    np.savez(tmp_path / "other.npz", images=np.zeros(3))
    with pytest.raises(DataError, match=r"is not mnist\.npz"):
        load("other.npz", tmp_path, seed=7)
    (tmp_path / "pickled.npz").write_bytes(b"\x80\x04not an archive")
    with pytest.raises(DataError, match=r"is not mnist\.npz"):
        load("pickled.npz", tmp_path, seed=7)


def test_synthetic_is_two_classes_for_fast_tests(tmp_path: Path) -> None:
    synthetic = load("synthetic", tmp_path, seed=7, samples=100)
    assert synthetic.classes == 2 and len(synthetic.x_train) + len(synthetic.x_test) == 100


@pytest.mark.parametrize(("global_batch", "workers"), [(16, 4), (16, 2), (15, 2), (16, 3), (5, 5), (7, 1)])
def test_worker_shares_cover_the_global_batch_once_as_evenly_as_it_goes(
    global_batch: int, workers: int
) -> None:
    shares = [worker_share(global_batch, workers, index) for index in range(workers)]
    covered = [position for offset, count in shares for position in range(offset, offset + count)]
    assert covered == list(range(global_batch))  # in worker order, each position once
    sizes = [count for _, count in shares]
    assert max(sizes) - min(sizes) <= 1 and sizes == sorted(sizes, reverse=True)


def test_a_global_batch_smaller_than_the_gang_is_refused() -> None:
    with pytest.raises(DataError, match="cannot be shared by 4 workers"):
        worker_share(3, 4, 0)


def test_each_pass_of_the_stream_is_a_permutation_and_reproducible() -> None:
    stream = ExampleStream(10, seed=7)
    first_two = stream.indices(0, 20)
    assert sorted(first_two[:10].tolist()) == list(range(10)) == sorted(first_two[10:].tolist())
    assert first_two[:10].tolist() != first_two[10:].tolist()  # reshuffled each pass
    assert ExampleStream(10, seed=7).indices(7, 6).tolist() == first_two[7:13].tolist()
    assert ExampleStream(10, seed=8).indices(0, 10).tolist() != first_two[:10].tolist()


@pytest.mark.parametrize("workers", [1, 2, 3, 4])
def test_the_examples_of_a_step_do_not_depend_on_the_number_of_workers(workers: int) -> None:
    """What makes a resize invisible to the data: global step k trains positions k*G..k*G+G-1,
    however many workers share them, and a resumed gang starts at the checkpoint's position."""
    stream, global_batch, resumed_at = ExampleStream(37, seed=3), 8, 5 * 8
    parts = [stream.worker_batches(resumed_at, global_batch, workers, index) for index in range(workers)]
    for step in range(5, 15):
        together = np.concatenate([next(part) for part in parts]).tolist()
        assert together == stream.indices(step * global_batch, global_batch).tolist()
