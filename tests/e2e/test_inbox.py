"""The supervisors' inbox (``GET /ui/approvals``) as supervisors use it, in Debian's Chromium driven by
Playwright, against the whole stack (``tests.api_stack.keyed_stack``: real Temporal dev server,
real worker with the offline model, the API over real HTTP with keys of two tenants):

- a supervisor signs in with an operator key; a conversation's approval (the cancel of
  #W4566809, 826.70, above the 500.00 threshold) appears in the open page by itself, with the
  exact detail the user confirmed, the amount, the reason, the process, the customer's
  pseudonym, the time left and a link to its run in the Web UI; approving it applies the write
  (the order is cancelled in the system of record) and it leaves the list, in that page and in
  a second supervisor's open page, which says who approved it;
- a rejection says so in plain words, and the order stays as it was;
- an approval that expires (a conversation started with a 15 s approval timeout; any timeout
  above 0 is allowed) leaves the list saying it expired and went to a human agent, and a click on
  it in a page that missed the change says the decision was not applied because it expired;
- a second supervisor's late click (their page missed the first decision) says the decision was
  not applied and who decided first, and changes nothing;
- signing in: the page without a session sends to the sign-in form (without keys, on the
  loopback dev API, the form asks only for the name decisions are recorded with); a wrong key and a service
  key are refused with what to do; no page, URL or cookie ever holds the key; the session cookie
  is HttpOnly and SameSite=Strict, stands for its key only on the inbox's routes, needs the
  CSRF token to change anything (refused without it, and the approval stays pending), is refused
  when forged or when its key was revoked, and a sign-in posted from another site is refused.

No message a supervisor reads holds an approval id or an error's kind. With
``STATEKEEPER_SAVE_SCREENSHOTS=1`` the inbox's screenshot is copied to ``docs/img/`` for
docs/operators.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import time
import uuid
from types import SimpleNamespace
from typing import AsyncIterator

import httpx
import pytest

from activities.store.api_keys import Role
from starter.api.inbox.sessions import COOKIE
from settings import Settings
from starter.api.server import api_beside
from starter.client.tenancy import start_attributes
from starter.ops.bootstrap import client_for
from tests.api_stack import keyed_stack, open_conversation
from tests.e2e.test_web_ui import CHROMIUM, CHROMIUM_ARGS, DOCS_IMG, playwright_api  # noqa: F401 (fixture)
from tests.policy_fixtures import EMAIL, PENDING
from tests.ports import free_port
from tests.workflow_harness import order_details
from workflows.domain.pseudonym import PREFIX as PSEUDONYM_PREFIX
from workflows.options import CUSTOMER_ID

AMOUNT = "826.70"
REASON = f"{AMOUNT} is above the approval threshold of 500.00."
EXPIRY_SECONDS = 15.0
"""The approval timeout of the expiry test's conversation: long enough for the page to show it first."""
SECONDS = 30_000
"""Playwright's wait for what the page shows (visibility and the feed need a second or two)."""
STORES = ("s-approve", "s-reject", "s-late", "s-expire")
TENANT = "inbox"


@pytest.fixture(scope="module")
async def stack(temporal_env, tmp_path_factory) -> AsyncIterator[SimpleNamespace]:
    # the tenant TENANT owns STORES: its pages list this module's approvals only, whatever else
    # the session's Temporal server runs for other modules (the default tenant's)
    keys = {"svc": (TENANT, Role.SERVICE), "ana": (TENANT, Role.OPERATOR), "bo": (TENANT, Role.OPERATOR),
            "cy": (TENANT, Role.OPERATOR), "acme_op": ("acme", Role.OPERATOR), "revoked": (TENANT, Role.OPERATOR)}
    async with keyed_stack(temporal_env, tmp_path_factory.mktemp("inbox"), keys, stores=STORES,
                           store_tenants={"acme-store": "acme", **{store: TENANT for store in STORES}},
                           web_ui_url="http://webui.test:8233") as s:
        yield s


@contextlib.asynccontextmanager
async def chromium(playwright_api) -> AsyncIterator[object]:  # noqa: F811 (the fixture's value)
    async with playwright_api.async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()


def expect(locator):  # noqa: ANN001, ANN201
    from playwright.async_api import expect as playwright_expect

    return playwright_expect(locator)


async def _signed_in(s, browser, who: str, name: str, live: bool = True):
    """A new browser context of supervisor ``name`` signed in with key ``who``, on the inbox.
    ``live`` False: the page's event stream is cut, as for a supervisor whose page missed
    the changes (its connection dropped, or it was left open in another tab)."""
    context = await browser.new_context()
    page = await context.new_page()
    if not live:
        await page.route("**/ui/approvals/events", lambda route: route.abort())
    await page.goto(s.url + "/ui/approvals")
    assert page.url == s.url + "/ui/sign-in"  # no session: the sign-in form first
    await page.fill('input[name="key"]', s.keys[who])
    await page.fill('input[name="approver"]', name)
    await page.click('button[type="submit"]')
    await page.wait_for_url(s.url + "/ui/approvals")
    await expect(page.locator(".approver")).to_have_text(name)
    if live:
        await expect(page.locator("#live")).to_have_text(re.compile("^Live"), timeout=SECONDS)
    return page


async def _to_approval(s, store: str) -> SimpleNamespace:
    """A conversation (started by the service key on ``store``) that asks to cancel #W4566809
    and confirms: it waits for a supervisor."""
    cid, say = await open_conversation(s, f"Hi, my email is {EMAIL}", store=store)

    detail = (await say(f"Please cancel order {PENDING}, I ordered it by mistake"))["awaiting_confirmation"]
    assert detail and PENDING in detail
    approval_id = (await say("yes"))["awaiting_approval"]
    assert approval_id
    return SimpleNamespace(cid=cid, approval_id=approval_id, detail=detail, store=store)


def _row(page, approval_id: str):  # noqa: ANN001, ANN202
    return page.locator(f'#pending li[data-approval-id="{approval_id}"]')


def _done(page, approval_id: str):  # noqa: ANN001, ANN202
    return page.locator(f'#decided li[data-approval-id="{approval_id}"]')


async def _approval(s, approval_id: str) -> dict:
    response = await s.http.get(f"/approvals/{approval_id}", headers=s.headers["ana"])
    assert response.status_code == 200, response.text
    return response.json()


async def _no_key_in(s, page) -> None:
    """Nothing the browser holds of the inbox has a key: not its page, its URL, its cookies."""
    html, cookies = await page.content(), await page.context.cookies()
    for key in s.keys.values():
        secret = key.split("_", 2)[2]  # sk_<key id>_<secret>: the secret may hold "_" itself
        assert key not in html and secret not in html and secret not in page.url
        assert all(secret not in c["value"] for c in cookies)


def _plain(message: str, approval_id: str) -> None:
    """A message for a person: no approval id, no error kind."""
    assert approval_id not in message and approval_id.rsplit("~", 1)[1] not in message
    assert not re.search(r"approval_refused|not_found|Error|Exception|Traceback", message), message


async def test_a_pending_approval_appears_and_approving_it_applies_the_write_for_every_open_page(stack, playwright_api):
    s = stack
    async with chromium(playwright_api) as browser:
        ana = await _signed_in(s, browser, "ana", "sup-ana")
        bo = await _signed_in(s, browser, "bo", "sup-bo")
        asked = await _to_approval(s, "s-approve")  # after the pages opened: it arrives by the event stream

        row = _row(ana, asked.approval_id)
        await expect(row).to_be_visible(timeout=SECONDS)
        await expect(_row(bo, asked.approval_id)).to_be_visible(timeout=SECONDS)
        await expect(row.locator(".detail")).to_have_text(asked.detail)  # word for word what the user confirmed
        await expect(row.locator(".amount")).to_have_text(AMOUNT)
        await expect(row.locator(".reason")).to_have_text(REASON)
        await expect(row.locator(".process")).to_have_text(f"Conversation {asked.cid}")
        pseudonym = (await s.temporal.get_workflow_handle(f"support-{asked.cid}").describe()
                     ).typed_search_attributes.get(CUSTOMER_ID)
        assert pseudonym and pseudonym.startswith(PSEUDONYM_PREFIX)
        await expect(row.locator(".customer")).to_have_text(pseudonym)
        await expect(row.locator(".time-left")).to_have_text(re.compile(r"^23 h 5\d min left$"))
        link = await row.get_by_role("link", name="Open the run in the Temporal Web UI").get_attribute("href")
        assert link == f"http://webui.test:8233/namespaces/default/workflows/support-{asked.cid}"
        shot = s.settings.data_dir / "inbox-pending.png"
        await ana.screenshot(path=str(shot), full_page=True)
        if os.environ.get("STATEKEEPER_SAVE_SCREENSHOTS") == "1":  # the one docs/operators.md shows
            shutil.copy(shot, DOCS_IMG / "inbox-pending.png")

        await row.locator("textarea").fill("checked with the customer")
        await row.get_by_role("button", name="Approve").click()
        done = _done(ana, asked.approval_id)
        await expect(done.locator(".message")).to_have_text(
            "You approved this: the change is being made, and the customer is told.", timeout=SECONDS)
        await expect(_row(ana, asked.approval_id)).to_have_count(0)  # it left the list
        # the second supervisor's page heard it too, and says who decided
        theirs = _done(bo, asked.approval_id).locator(".message")
        await expect(theirs).to_have_text(re.compile(r"^Approved by sup-ana at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC: "
                                                     r"the change is being made"), timeout=SECONDS)
        await expect(_row(bo, asked.approval_id)).to_have_count(0)
        _plain(await theirs.inner_text(), asked.approval_id)

        approved = await _approval(s, asked.approval_id)
        assert approved["status"] == "approved" and approved["decided_by"] == "sup-ana"
        for _ in range(100):  # the approved write runs after the decision
            if order_details(s.backend, PENDING, asked.store)["status"] == "cancelled":
                break
            await asyncio.sleep(0.2)
        assert order_details(s.backend, PENDING, asked.store)["status"] == "cancelled"
        for _ in range(100):  # the journal records the write's event after the write (in the background)
            events = await s.http.get(f"/conversations/{asked.cid}/events", params={"wait": 0},
                                      headers=s.headers["svc"])
            if "event: operation.applied" in events.text:
                break
            await asyncio.sleep(0.2)
        assert "event: operation.applied" in events.text
        for page in (ana, bo):
            await _no_key_in(s, page)


async def test_a_rejection_says_so_and_changes_nothing(stack, playwright_api):
    s = stack
    async with chromium(playwright_api) as browser:
        ana = await _signed_in(s, browser, "ana", "sup-ana")
        asked = await _to_approval(s, "s-reject")
        row = _row(ana, asked.approval_id)
        await expect(row).to_be_visible(timeout=SECONDS)

        # the session alone, without the page's CSRF token, changes nothing
        [cookie] = [c["value"] for c in await ana.context.cookies() if c["name"] == COOKIE]
        forged = await s.http.post(f"/approvals/{asked.approval_id}", headers=_with(cookie),
                                   json={"decision": "approve", "approver": "sup-ana"})
        assert forged.status_code == 403, forged.text
        assert "reload the page" in forged.json()["detail"]
        assert (await _approval(s, asked.approval_id))["status"] == "pending"

        await row.locator("textarea").fill("the customer asked to keep it")
        await row.get_by_role("button", name="Reject").click()
        message = _done(ana, asked.approval_id).locator(".message")
        await expect(message).to_have_text("You rejected this: nothing is changed, and the customer is told the "
                                           "request was declined.", timeout=SECONDS)
        _plain(await message.inner_text(), asked.approval_id)
        rejected = await _approval(s, asked.approval_id)
        assert rejected["status"] == "rejected" and rejected["decided_by"] == "sup-ana"
        assert order_details(s.backend, PENDING, asked.store)["status"] == "pending"
        await _no_key_in(s, ana)


async def test_a_second_supervisors_late_click_says_who_decided_first_and_changes_nothing(stack, playwright_api):
    s = stack
    async with chromium(playwright_api) as browser:
        asked = await _to_approval(s, "s-late")
        bo = await _signed_in(s, browser, "bo", "sup-bo", live=False)  # this page hears of no change
        cy = await _signed_in(s, browser, "cy", "sup-cy")
        await expect(_row(cy, asked.approval_id)).to_be_visible(timeout=SECONDS)
        await bo.reload()  # the page renders the list as it opens: the approval is there, with its buttons
        late = _row(bo, asked.approval_id)
        await expect(late).to_be_visible()

        await _row(cy, asked.approval_id).get_by_role("button", name="Approve").click()
        await expect(_done(cy, asked.approval_id).locator(".message")).to_have_text(
            re.compile("^You approved this"), timeout=SECONDS)
        await expect(late).to_be_visible()  # sup-bo's page still shows it
        await late.get_by_role("button", name="Reject").click()
        message = _done(bo, asked.approval_id).locator(".message")
        await expect(message).to_have_text(re.compile(
            r"^Your rejection was not applied: someone decided first\. Approved by sup-cy at "), timeout=SECONDS)
        _plain(await message.inner_text(), asked.approval_id)
        after = await _approval(s, asked.approval_id)
        assert after["status"] == "approved" and after["decided_by"] == "sup-cy"


async def test_an_expired_approval_leaves_the_list_saying_so_and_a_click_on_it_says_why_nothing_happened(
        stack, playwright_api):
    s = stack
    short = client_for(s.temporal, s.settings.model_copy(update={"approval_timeout_seconds": EXPIRY_SECONDS}))
    async with chromium(playwright_api) as browser:
        ana = await _signed_in(s, browser, "ana", "sup-ana")
        bo = await _signed_in(s, browser, "bo", "sup-bo", live=False)
        cid = await short.start_conversation(f"inbox-{uuid.uuid4().hex[:8]}", store="s-expire",
                                             search_attributes=start_attributes(TENANT))
        await short.send_message(cid, f"Hi, my email is {EMAIL}")
        assert (await short.send_message(cid, f"Please cancel order {PENDING}, I ordered it by mistake")
                ).awaiting_confirmation
        approval_id = (await short.send_message(cid, "yes")).awaiting_approval
        assert approval_id
        started = time.monotonic()

        row = _row(ana, approval_id)
        await expect(row).to_be_visible(timeout=SECONDS)
        await expect(row.locator(".time-left")).to_have_text(re.compile(r"^\d{1,2} s left$"))
        await bo.reload()
        await expect(_row(bo, approval_id)).to_be_visible(timeout=SECONDS)

        message = _done(ana, approval_id).locator(".message")
        await expect(message).to_have_text(re.compile(
            r"^This approval expired at .+ UTC before anyone decided: nothing was changed, and the request was "
            r"handed to a human agent as a ticket\.$"), timeout=SECONDS + EXPIRY_SECONDS * 1000)
        assert time.monotonic() - started >= EXPIRY_SECONDS - 2  # it waited for the timeout
        await expect(row).to_have_count(0)
        _plain(await message.inner_text(), approval_id)

        await _row(bo, approval_id).get_by_role("button", name="Approve").click()
        late = _done(bo, approval_id).locator(".message")
        await expect(late).to_have_text(re.compile(r"^Your approval was not applied\. This approval expired at "),
                                        timeout=SECONDS)
        assert (await _approval(s, approval_id))["status"] == "expired"
        assert order_details(s.backend, PENDING, "s-expire")["status"] == "pending"


async def test_signing_in_never_shows_the_key_and_refuses_wrong_keys(stack, playwright_api):
    s = stack
    async with chromium(playwright_api) as browser:
        page = await (await browser.new_context()).new_page()
        await page.goto(s.url + "/ui/approvals")
        assert page.url == s.url + "/ui/sign-in"
        wrong = "sk_0123456789ab_" + "x" * 43
        for key, status, said in ((wrong, 401, "That key is not valid: it is unknown, revoked or mistyped."),
                                  (s.keys["svc"], 403, "That is not an operator key: the inbox needs an operator key "
                                                       "of your tenant.")):
            await page.fill('input[name="key"]', key)
            await page.fill('input[name="approver"]', "sup-ana")
            async with page.expect_response(lambda r: r.url.endswith("/ui/sign-in") and r.request.method == "POST"
                                            ) as answered:
                await page.click('button[type="submit"]')
            assert (await answered.value).status == status
            await expect(page.locator("#problem")).to_have_text(said)
            html = await page.content()
            assert key not in html and key.split("_", 2)[2] not in html and key not in page.url
            assert await page.input_value('input[name="key"]') == ""  # never sent back
            assert not [c for c in await page.context.cookies() if c["name"] == COOKIE]
        # a name that cannot be recorded with a decision
        await page.fill('input[name="key"]', s.keys["ana"])
        await page.fill('input[name="approver"]', "Ana Smith")
        await page.click('button[type="submit"]')
        await expect(page.locator("#problem")).to_have_text(re.compile("^A name for decisions is 1 to 128"))
        assert page.url == s.url + "/ui/sign-in"

        signed = await _signed_in(s, browser, "ana", "sup-ana")
        await _no_key_in(s, signed)
        [cookie] = [c for c in await signed.context.cookies() if c["name"] == COOKIE]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/"
        assert not cookie["secure"]  # served over http here; over https it is Secure
        assert await signed.evaluate("document.cookie") == ""  # no script can read it
        await signed.get_by_role("button", name="Sign out").click()
        await signed.wait_for_url(s.url + "/ui/sign-in")
        assert not [c for c in await signed.context.cookies() if c["name"] == COOKIE]
        await signed.goto(s.url + "/ui/approvals")
        assert signed.url == s.url + "/ui/sign-in"


async def _session(s, who: str) -> str:
    """The session cookie signing in with key ``who`` sets (kept out of the shared client's jar)."""
    response = await s.http.post("/ui/sign-in", data={"key": s.keys[who], "approver": "sup-x"})
    s.http.cookies.clear()
    assert response.status_code == 303 and response.headers["location"] == "/ui/approvals", response.text
    assert "httponly" in response.headers["set-cookie"].lower()
    assert "samesite=strict" in response.headers["set-cookie"].lower()
    return response.cookies[COOKIE]


def _with(cookie: str) -> dict[str, str]:
    return {"Cookie": f"{COOKIE}={cookie}"}


async def test_a_session_stands_for_its_key_only_on_the_inbox_and_only_while_the_key_is_active(stack):
    s = stack
    session = await _session(s, "ana")
    assert s.keys["ana"].split("_", 2)[2] not in session
    page = await s.http.get("/ui/approvals", headers=_with(session))
    assert page.status_code == 200 and "frame-ancestors 'none'" in page.headers["content-security-policy"]
    assert s.keys["ana"] not in page.text
    assert (await s.http.get("/approvals", headers=_with(session))).status_code == 200  # the API route the page calls
    elsewhere = await s.http.get("/conversations", headers=_with(session))
    assert elsewhere.status_code == 401  # any other route still needs a key
    events = await s.http.get("/ui/approvals/events")  # no session: no stream
    assert events.status_code == 401

    forged = session[:-4] + ("AAAA" if not session.endswith("AAAA") else "BBBB")
    refused = await s.http.get("/ui/approvals", headers=_with(forged))
    assert refused.status_code == 303 and refused.headers["location"] == "/ui/sign-in"
    assert (await s.http.get("/approvals", headers=_with(forged))).status_code == 401

    other_site = await s.http.post("/ui/sign-in", data={"key": s.keys["ana"], "approver": "sup-x"},
                                   headers={"Origin": "http://attacker.example"})
    s.http.cookies.clear()
    assert other_site.status_code == 403 and COOKIE not in other_site.cookies

    tenant = await _session(s, "acme_op")  # another tenant's supervisor sees none of ours
    listed = await s.http.get("/approvals", headers=_with(tenant))
    assert listed.status_code == 200 and listed.json()["items"] == []

    revoked = await _session(s, "revoked")
    assert (await s.http.get("/ui/approvals", headers=_with(revoked))).status_code == 200
    assert s.key_store.revoke(s.ids["revoked"])
    gone = await s.http.get("/ui/approvals", headers=_with(revoked))
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/sign-in"
    answer = await s.http.get("/approvals", headers=_with(revoked))
    assert answer.status_code == 401 and "revoked" in answer.json()["detail"]


async def test_the_inbox_pages_are_not_in_the_api_document(stack):
    document = (await stack.http.get("/openapi.json")).json()
    assert not [path for path in document["paths"] if path.startswith("/ui")]


async def test_without_keys_the_loopback_inbox_asks_only_for_a_name(temporal_env, tmp_path, playwright_api):
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'sor.sqlite'}", data_dir=tmp_path, anthropic_api_key=None,
                        task_queue=f"inbox-keyless-{uuid.uuid4().hex[:8]}")
    async with api_beside(temporal_env.client, settings, host="127.0.0.1", port=free_port()) as url:
        async with chromium(playwright_api) as browser:
            page = await (await browser.new_context()).new_page()
            await page.goto(url + "/ui/approvals")
            assert page.url == url + "/ui/sign-in"
            assert await page.locator('input[name="key"]').count() == 0  # no key to give
            await page.fill('input[name="approver"]', "sup-dev")
            await page.click('button[type="submit"]')
            await page.wait_for_url(url + "/ui/approvals")
            await expect(page.locator(".approver")).to_have_text("sup-dev")
            await expect(page.locator("#live")).to_have_text(re.compile("^Live"), timeout=SECONDS)
