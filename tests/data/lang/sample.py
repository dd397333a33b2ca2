"""Order service used by the index tests."""

import os
import os.path as osp
from django.db import transaction
from .models import Order as OrderModel, Payment
from ..core.db import *

DEBUG = True
DATABASE_URL = "postgres://localhost/app"
GREETING = f"hello {os.name}"


class OrderService(BaseService, metaclass=Meta):
    """Saves orders."""

    def __init__(self, session):
        self.session = session

    @transaction.atomic
    @app.route(
        "/pay",
        methods=["POST"],
    )
    def save_order(self, order):
        """Persist an order.

        Returns the saved order.
        """
        self.session.add(order)
        OrderModel.objects.filter(id=order.id).update(state="saved")
        return order

    def only_doc(self):
        """Nothing else."""


def process(items):
    def helper(item):
        return item * 2

    with transaction.atomic(), engine.begin() as conn:
        conn.execute(
            "UPDATE orders SET state = 'done'"
        )
    return [helper(item) for item in items]


def one_liner(): return 1


if __name__ == "__main__":
    process([1, 2])
