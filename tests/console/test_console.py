"""The console in a real browser against the real stack: each role signs in and uses its pages; a price
change reaches /v1/models; a playground request's exact cost is found in the finance view; the CSV export
of the month sums to its monthly total; a customer cannot see another tenant's data; a revoked key ends
its session. Every main page is photographed at 1280 px, and the customer's and a finance page on a phone.
"""

from __future__ import annotations

import csv
import datetime
import io
import time
from decimal import Decimal

import pytest
from conftest import DESKTOP, PHONE, Console

TENANT = "sdk-demo"  # the stack's demo tenant, whose key is stack.api_key


def month() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m")


@pytest.fixture(scope="session")
def playground(chromium, stack, shots) -> dict:
    """One playground request as the demo customer (the README's invoice example): its id and cost."""
    console = Console(chromium.new_context(viewport=DESKTOP), stack, shots, "customer")
    try:
        console.sign_in(stack.api_key)
        console.goto("/console/playground")
        assert "invoice_number" in console.page.input_value("#schema")
        with console.page.expect_navigation(timeout=300_000):
            console.page.click("form.playground button[type=submit]")
        console.page.wait_for_selector("#answer")
        result = {
            "id": console.text("#answer-id"),
            "cost": console.text("#answer-cost"),
            "validity": console.text("#validity"),
            "content": console.text("#answer-content"),
        }
        console.shot("playground")
        assert not console.problems, console.problems
        return result
    finally:
        console.context.close()


def test_a_customer_sees_balance_spend_requests_and_keys(open_console, stack, playground):
    assert "Valid against the schema" in playground["validity"], playground
    assert '"invoice_number"' in playground["content"]
    Decimal(playground["cost"])  # an exact decimal, as text

    console = open_console(stack.api_key, label="customer")
    assert console.page.url.endswith("/console/account")
    assert "USD" in console.text("#balance")
    assert console.page.locator("figure.chart svg").count() >= 2, "spend per day and per model are charted"
    console.shot("overview")

    console.goto("/console/requests")
    row = console.page.locator("#requests tbody tr", has_text=playground["id"])
    assert row.count() == 1
    assert row.locator("td.cost").inner_text().strip() == playground["cost"]
    console.shot("requests")
    with console.page.expect_navigation():
        row.locator("a").first.click()
    assert playground["id"] in console.text("#request-detail")
    assert playground["cost"] in console.text("#request-detail")
    console.shot("request-detail")

    console.goto("/console/keys")
    console.page.fill("#key-name", "from the browser")
    with console.page.expect_navigation():
        console.page.click("form[action='/console/keys'] button[type=submit]")
    secret = console.text("#new-secret")
    assert secret.startswith("rk-")
    console.shot("keys")
    console.goto("/console/keys")
    assert secret not in console.page.content(), "a new key's secret is shown once"
    assert "from the browser" in console.text("#keys")


def test_ops_changes_a_price_behind_a_confirmation_and_v1_models_shows_it(open_console, stack):
    console = open_console(stack.admin_token(["ops"], subject="console-ops"), label="ops")
    assert console.page.url.endswith("/console/ops/models")
    nav = console.text("nav.sections")
    assert "Catalog" in nav and "Workers" in nav and "Cost records" not in nav, nav
    console.shot("catalog")
    # At 1280 pixels the whole catalog shows, its Edit buttons included, without scrolling sideways.
    assert console.shows_whole("#catalog"), console.page.evaluate("document.querySelector('.table-scroll').scrollWidth")

    with console.page.expect_navigation():
        console.page.locator(f"tr[data-model='{stack.model}'] a.button").click()
    console.page.fill("#input_price", "0.125")
    console.page.fill("#cached_input_price", "0.03125")
    console.page.fill("#output_price", "0.375")
    console.page.fill("#batch_price_ratio", "0.4")
    with console.page.expect_navigation():
        console.page.click("#edit-model button[type=submit]")
    review = console.text("#review")
    assert "0.125" in review and "0.03125" in review and "0.375" in review, review
    assert "Batch price" in review and "0.5 ×" in review and "0.4 ×" in review, review
    # Nothing is written before the confirmation.
    assert stack.get_json(f"/v1/models/{stack.model}")["pricing"]["input_per_million_tokens"] == "0.1"
    console.shot("price-review")
    with console.page.expect_navigation():
        console.page.click("#confirm")
    assert "Saved the changes" in console.text("main")
    assert console.text(f"tr[data-model='{stack.model}'] td.price-in") == "0.125"
    assert console.text(f"tr[data-model='{stack.model}'] td.price-cached") == "0.03125"
    assert console.text(f"tr[data-model='{stack.model}'] td.batch-ratio") == "0.4 ×"
    pricing = stack.get_json("/v1/models")["data"][0]["pricing"]
    assert (pricing["input_per_million_tokens"], pricing["output_per_million_tokens"]) == ("0.125", "0.375")
    assert pricing["cached_input_per_million_tokens"] == "0.03125"

    console.goto("/console/ops/workers")
    workers = console.text("#workers")
    assert stack.worker_url in workers and "ready" in workers, workers
    console.shot("workers")

    # A finance page is refused with the API's reason, shown in the page.
    response = console.goto("/console/finance/costs")
    assert response.status == 403
    assert "finance" in console.text("div.notice.error")


def test_finance_finds_the_playground_cost_and_the_csv_sums_to_the_monthly_total(open_console, stack, playground):
    console = open_console(stack.admin_token(["finance"], subject="console-finance"), label="finance")
    tenant_id = stack.tenant_id(TENANT)
    console.goto(f"/console/finance/costs?month={month()}&tenant_id={tenant_id}")
    cost = console.text(f"#cost-records tr[data-request='{playground['id']}'] td.cost")
    assert cost == playground["cost"], "the finance view shows the playground's exact cost"
    console.shot("costs")

    with console.page.expect_download() as download:
        console.page.click("#export-csv")
    rows = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert any(r["request_id"] == playground["id"] and r["cost"] == playground["cost"] for r in rows)
    # The export was filtered by tenant: sum it, and check it against that tenant's monthly total.
    tenant_sum = sum((Decimal(r["cost"]) for r in rows), Decimal(0))

    console.goto(f"/console/finance/totals?month={month()}")
    tenant_total = console.text(f"#totals tr[data-tenant='{tenant_id}'] td.cost")
    assert Decimal(tenant_total) == tenant_sum, (tenant_total, tenant_sum)
    # And the whole month's export sums to the grand total, to the last digit.
    with console.page.expect_download() as download:
        console.page.click("form.filters a.button")
    every = list(csv.DictReader(io.StringIO(download.value.path().read_text())))
    assert Decimal(console.text("#grand-total")) == sum((Decimal(r["cost"]) for r in every), Decimal(0))
    assert console.page.locator("figure.chart svg").count() >= 1
    console.shot("totals")

    console.goto("/console/finance/tenants")
    assert TENANT in console.text("#tenants")
    assert "Grant credit" not in console.text("main"), "finance reads the books, never writes them"
    console.shot("tenants")
    console.goto(f"/console/finance/ledger?tenant_id={tenant_id}")
    assert playground["id"] in console.text("#ledger"), "the request's charge is in the ledger"
    console.shot("ledger")


def test_an_admin_grants_credit_and_reads_the_audit_log(open_console, stack):
    console = open_console(stack.admin_token(["admin", "finance"], subject="console-admin"), label="admin")
    console.goto("/console/finance/tenants")
    tenant_id = stack.tenant_id(TENANT)
    before = Decimal(console.text(f"#tenants tr[data-tenant='{tenant_id}'] td.balance"))
    console.page.select_option("#grant-tenant", tenant_id)
    console.page.fill("#grant-amount", "1.2500000001")
    console.page.fill("#grant-note", "browser test")
    with console.page.expect_navigation():
        console.page.click("#grant button[type=submit]")
    assert console.dialogs, "the grant asked for a confirmation first (the script runs under the CSP)"
    assert "Granted 1.2500000001 USD" in console.text("main")
    after = Decimal(console.text(f"#tenants tr[data-tenant='{tenant_id}'] td.balance"))
    assert after - before == Decimal("1.2500000001")

    # An amount the ledger would round is the API's refusal, shown clearly.
    console.page.fill("#grant-amount", "0.00000000000000001")
    with console.page.expect_navigation():
        console.page.click("#grant button[type=submit]")
    assert "at most 16 decimals" in console.text("div.notice.error")

    console.goto("/console/ops/audit")
    audit = console.text("#audit")
    assert "credits.grant" in audit and "console-admin" in audit, audit
    console.shot("audit")


def test_a_customer_cannot_see_another_tenants_data(open_console, stack, playground):
    other_key = stack.create_key("console-other", name="other")
    stack.grant("console-other", "5")
    status, _, theirs = stack.chat(
        other_key, {"model": stack.model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
    )
    assert status == 200 and theirs

    mine = open_console(stack.api_key, label="isolation")
    mine.goto("/console/requests")
    assert theirs not in mine.page.content()
    response = mine.goto(f"/console/requests/{theirs}")
    assert response.status == 404 and "not found" in mine.text("div.notice.error")
    mine.goto("/console/keys")
    assert "other" not in mine.text("#keys").split()
    response = mine.goto("/console/finance/costs")
    assert response.status == 403 and theirs not in mine.page.content()

    them = open_console(other_key, label="isolation-other")
    them.goto("/console/requests")
    assert theirs in them.page.content() and playground["id"] not in them.page.content()
    response = them.goto(f"/console/requests/{playground['id']}")
    assert response.status == 404
    them.goto("/console/account")
    assert "console-other" in them.text("section.cards") and TENANT not in them.text("section.cards")


def test_a_confined_token_sees_its_tenant_only(open_console, stack, playground):
    tenant_id = stack.tenant_id("sdk-broke")
    console = open_console(stack.admin_token(["finance", "ops"], tenant_id=tenant_id), label="confined")
    nav = console.text("nav.sections")
    assert "Catalog" not in nav, "ops pages need an unconfined token"
    console.goto(f"/console/finance/costs?month={month()}")
    assert playground["id"] not in console.page.content()
    console.goto(f"/console/finance/totals?month={month()}")
    assert TENANT not in console.text("main")
    response = console.goto("/console/ops/models")
    assert response.status == 403


def test_revoking_the_key_ends_its_session(open_console, stack):
    key = stack.create_key(TENANT, name="short-lived")
    console = open_console(key, label="revoke")
    console.goto("/console/keys")
    public = key.split("-")[1]
    row = console.page.locator("#keys tbody tr", has_text=f"rk-{public}")
    with console.page.expect_navigation():
        row.locator("button.danger").click()
    assert console.dialogs and "Revoke" in console.dialogs[-1]
    assert "revoked" in console.text("div.notice")
    time.sleep(2.5)  # the gateway's key cache (RUNAII_KEY_CACHE_MS, 2 s) forgets the key
    console.goto("/console/account")
    assert "/console/sign-in" in console.page.url
    assert "no longer accepts" in console.text("main")


def test_pages_fit_a_phone_and_sign_out_ends_the_session(open_console, stack, playground):
    phone = open_console(stack.api_key, viewport=PHONE, label="phone")
    for path, name in [("/console/account", "overview"), ("/console/requests", "requests"), ("/console/playground", "playground")]:
        phone.goto(path)
        phone.shot(name)
        assert phone.fits_the_viewport(), f"{path} scrolls sideways on a phone: {phone.widest()}"
    staff = open_console(stack.admin_token(["finance"]), viewport=PHONE, label="phone-finance")
    staff.goto(f"/console/finance/totals?month={month()}")
    staff.shot("totals")
    assert staff.fits_the_viewport(), staff.widest()

    signed_out = open_console(label="sign-in")
    signed_out.goto("/console/sign-in")
    signed_out.shot("form")
    phone.page.click("header form button")
    phone.page.wait_for_url("**/console/sign-in")
    phone.goto("/console/account")
    assert "/console/sign-in" in phone.page.url
