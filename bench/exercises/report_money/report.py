"""The sales report: one line per product, then the total."""

from formatting import money, percent


def sales_report(sales: dict[str, float]) -> str:
    total = sum(sales.values())
    lines = [
        f"{name}: {money(amount)} ({percent(amount / total)})" for name, amount in sales.items()
    ]
    lines.append(f"total: {money(total)}")
    return "\n".join(lines)
