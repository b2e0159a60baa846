"""CPU per one-statement read on PostgreSQL, in one process on uvloop with 16 concurrent callers: SQLAlchemy's
async engine (the API's way into PostgreSQL, store/database.py) against psycopg's own async connections, on the
same connections, the same statement. It separates what the engine's way costs beyond the driver's: the pool's
checkout and return, the greenlet that runs the synchronous code (sqlalchemy.util.greenlet_spawn), and the
adapted cursor. bench/README.md#the-apis-way-into-postgresql has its figures.
    .venv/bin/python bench/driver_cost.py [N]      # PostgreSQL at 127.0.0.1:5432 (BENCH_PG to change)"""

import asyncio
import os
import sys
import time
from collections.abc import Awaitable, Callable, Iterator

import psycopg
import uvloop
from sqlalchemy import Column, Integer, MetaData, String, Table, select
from sqlalchemy.ext.asyncio import create_async_engine
from sqlalchemy.util import await_, greenlet_spawn

URL = os.environ.get("BENCH_PG", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
N = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
CALLERS = 16
ROUNDS = 3
metadata = MetaData()
table = Table("bench_driver_cost", metadata, Column("id", Integer, primary_key=True), Column("name", String))
QUERY = select(table.c.id, table.c.name).where(table.c.id == 1)
SQL = "SELECT id, name FROM bench_driver_cost WHERE id = %(id)s"


async def main() -> None:
    engine = create_async_engine(URL, pool_size=20, max_overflow=10, isolation_level="AUTOCOMMIT")
    async with engine.connect() as connection:
        await connection.run_sync(metadata.drop_all)
        await connection.run_sync(metadata.create_all)
        await connection.execute(table.insert().values(id=1, name="x"))
    sync_engine = engine.sync_engine

    async def driver_read(connection) -> list:  # psycopg's AsyncConnection
        cursor = connection.cursor()
        await cursor.execute(SQL, {"id": 1})
        rows = await cursor.fetchall()
        await cursor.close()
        return rows

    def checkout_only() -> None:
        with sync_engine.connect():
            pass

    def checkout_and_driver_read() -> list:
        with sync_engine.connect() as connection:
            return await_(driver_read(connection.connection.dbapi_connection._connection))  # type: ignore[union-attr]

    def engine_read() -> object:
        with sync_engine.connect() as connection:
            return connection.execute(QUERY).first()

    # psycopg alone: connections of its own, one per caller, opened as the engine opens its own
    plain_url = URL.replace("postgresql+psycopg://", "postgresql://")
    free: asyncio.Queue = asyncio.Queue()
    for _ in range(CALLERS):
        free.put_nowait(await psycopg.AsyncConnection.connect(plain_url, autocommit=True))

    async def driver_alone() -> list:
        connection = await free.get()
        try:
            return await driver_read(connection)
        finally:
            free.put_nowait(connection)

    variants: dict[str, Callable[[], Awaitable[object]]] = {
        "psycopg alone": driver_alone,
        "the pool's checkout and return only": lambda: greenlet_spawn(checkout_only),
        "checkout + psycopg's read in the greenlet": lambda: greenlet_spawn(checkout_and_driver_read),
        "the engine's way (checkout + Core select)": lambda: greenlet_spawn(engine_read),
    }

    async def caller(call: Callable[[], Awaitable[object]], numbers: Iterator[int]) -> None:
        for _ in numbers:
            await call()

    for round_number in range(1, ROUNDS + 1):
        for label, call in variants.items():
            numbers = iter(range(N))
            cpu = time.process_time()
            await asyncio.gather(*(caller(call, numbers) for _ in range(CALLERS)))
            print(f"round {round_number}: {label:44s} {1e6 * (time.process_time() - cpu) / N:7.1f} µs of CPU per read")
    while not free.empty():
        await free.get_nowait().close()
    async with engine.connect() as connection:
        await connection.run_sync(metadata.drop_all)
    await engine.dispose()


uvloop.run(main())
