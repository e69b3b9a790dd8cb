"""A write's scope: its Spark jobs in one job group, and nothing of it left behind if it fails.

Every write path (`use.qbeast.writer`: a user's write, indexing staging files, an optimizer's
rewrite) names the files its tasks may write before they run (`use.qbeast.write_tasks.write_files`);
this is where a failure or a cancel turns that list into a cleanup, once no task can still be
writing.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from use.qbeast.write_tasks import delete_files
from use.runtime.jobs import await_job_group_tasks, job_group

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["discard_write", "write_scope"]


@contextlib.contextmanager
def write_scope(spark: SparkSession, table_root: str, written: list[str], description: str) -> Iterator[None]:
    """The block writes files of `table_root` and lists every name a task may write in `written`
    before it runs (`write_files`): its Spark jobs run in a job group (the caller's, else one of the
    write's own, `use.runtime.jobs.job_group`), and if the block fails those files are deleted once the
    group's tasks have stopped (`discard_write`), so nothing of a failed write is left."""
    with job_group(spark, f"use-write-{uuid.uuid4().hex}", description, keep_existing=True):
        try:
            yield
        except BaseException:
            discard_write(spark, table_root, written)
            raise


def discard_write(spark: SparkSession, table_root: str, names: Iterable[str]) -> None:
    """Delete the named files of a failed or cancelled write once its tasks have stopped
    (`use.runtime.jobs.await_job_group_tasks`): a cancelled task still running could otherwise create a
    file after the cleanup, or delete one under a caller listing the table."""
    await_job_group_tasks(spark)
    delete_files(table_root, names)
