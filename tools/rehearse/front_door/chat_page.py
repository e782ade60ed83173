"""The chat page, rehearsed: headless Chromium driven through WebDriver (selenium) against the
gatekeeper that serves the page in front of the real group.

Every row acts as a person would: load the page, type the key and a prompt, watch the reply
arrive, hit the reply limit, use a wrong key, start a New chat; each state is saved as a
screenshot in the run's log directory. The browser is Debian's `chromium` with its
`chromium-driver`; `.ci/run` installs both when missing, and a run without them stops with the
install command (`find_browser`).

`mutant_check` serves a copy of app.js whose cut-off condition never holds and expects the
cut-off row to fail on it: the row would catch a page that drops `finish_reason: "length"`
silently, the field report's bug.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from components.manifests import chat
from tools.rehearse.checks import Check
from tools.rehearse.front_door.gatekeeper_run import Gate, request
from tools.rehearse.group.workspace import RehearsalError, poll

INSTALL_HINT = "apt-get install -y chromium chromium-driver (Debian, Ubuntu)"
#: The condition the cut-off note rests on, and a mutant of it that never holds.
NOTE_CONDITION = 'finish === "length"'
NOTE_MUTANT = 'finish === "cut"'
#: A desktop window, and a phone's (CSS pixels of a 6.1" phone).
DESKTOP = (1100, 850)
PHONE = (390, 844)
#: Longest wait for one reply in the browser; the tiny model answers in seconds.
REPLY_WAIT_S = 120.0
#: Reply limits: one long enough to watch arrive, one low enough to be hit.
STREAM_LIMIT = 64
CUT_LIMIT = 8
#: A random-weight model may sample its end-of-turn token before the limit (2 of 512 ids); a
#: reply that stopped short says nothing of the note, so the cut-off row asks again.
CUT_ATTEMPTS = 3
#: A streamed reply shorter than this (the model ended its turn) is asked again.
SHORT_REPLY = 8

#: Installed by `execute_script` (DevTools, not subject to the page's CSP): records the last
#: reply's text length and state at every DOM change.
_RECORDER = """
window.chatSamples = [];
const log = document.getElementById("log");
new MutationObserver(() => {
  const reply = [...log.querySelectorAll("article.assistant")].pop();
  if (!reply) return;
  window.chatSamples.push([performance.now(),
    reply.querySelector(".content").textContent.length, reply.dataset.state || ""]);
}).observe(log, {subtree: true, childList: true, characterData: true, attributes: true});
"""
_LAST_REPLY = """
const reply = [...document.querySelectorAll("article.assistant")].pop();
if (!reply) return null;
const text = (selector) => {
  const node = reply.querySelector(selector);
  return node ? node.textContent : "";
};
return {state: reply.dataset.state || "", finish: reply.dataset.finish || "",
  content: text(".content"), note: text(".note"), meta: text(".meta")};
"""


def find_browser() -> tuple[str, str]:
    """Chromium and its driver, or a RehearsalError naming the command that installs them."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if Path("/usr/bin/chromedriver").exists() else None
    )
    if browser is None or driver is None:
        raise RehearsalError(
            "chromium and chromedriver are needed for the chat page's rows: " + INSTALL_HINT
        )
    return browser, driver


@contextmanager
def browser_session(size: tuple[int, int] = DESKTOP) -> Iterator[Any]:
    """A headless Chromium under WebDriver, quit on exit."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = find_browser()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    # No sandbox: CI and the rehearsal run as root, where Chromium's sandbox refuses to start.
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument(f"--window-size={size[0]},{size[1]}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        yield driver
    finally:
        driver.quit()


@dataclass
class ChatSession:
    """One browser on the page: the steps a person takes, and the screenshots of each state."""

    driver: Any
    url: str
    shots: Path
    saved: list[str]

    def open(self, api_key: str) -> None:
        self.driver.get(self.url + "/")
        self.type_into("key", api_key)
        self.driver.execute_script(_RECORDER)

    def type_into(self, element_id: str, text: str) -> None:
        from selenium.webdriver.common.by import By
        from selenium.webdriver.common.keys import Keys

        # Select all and type over it, as a person does (no `change` on an emptied field).
        field = self.driver.find_element(By.ID, element_id)
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(text)

    def click(self, element_id: str) -> None:
        from selenium.webdriver.common.by import By

        self.driver.find_element(By.ID, element_id).click()

    def ask(self, prompt: str, limit: int) -> None:
        self.type_into("limit", str(limit))
        self.type_into("prompt", prompt)
        self.driver.execute_script("window.chatSamples = [];")
        self.click("send")

    def last_reply(self) -> dict[str, str] | None:
        return self.driver.execute_script(_LAST_REPLY)

    def wait_reply(self, states: tuple[str, ...] = ("done", "stopped")) -> dict[str, str]:
        reply = poll(self.last_reply, lambda r: (r or {}).get("state") in states, REPLY_WAIT_S)
        if reply is None or reply["state"] not in states:
            raise RehearsalError(f"the page showed no finished reply within {REPLY_WAIT_S:.0f} s")
        return reply

    def notice(self) -> str:
        return self.driver.execute_script(
            'const n = document.getElementById("notice"); return n.hidden ? "" : n.textContent;'
        )

    def shot(self, name: str) -> None:
        path = self.shots / f"chat-{name}.png"
        self.driver.save_screenshot(str(path))
        self.saved.append(path.name)


def page_check(gate: Gate) -> Check:
    """The page's files load without a key, each with the CSP; nothing else is served."""
    answers = {path: request(gate.base_url, "GET", path) for path in chat.ROUTES}
    served = [p for p, r in answers.items() if r.status == 200]
    with_csp = [
        p for p, r in answers.items() if r.headers.get("Content-Security-Policy") == chat.CSP
    ]
    other = request(gate.base_url, "GET", "/index.html").status
    return Check(
        "chat page files",
        f"{len(chat.ROUTES)} files 200 without key, each with the CSP; /index.html 404",
        f"{len(served)} 200, {len(with_csp)} with the CSP; /index.html {other}",
        len(served) == len(with_csp) == len(chat.ROUTES) and other == 404,
    )


def stream_check(session: ChatSession) -> Check:
    """Text appears and grows while the reply is still streaming; TTFT and tokens/s shown.

    A random-weight model may sample its end-of-turn token within the first tokens; a reply that
    short says nothing of streaming, so the row asks again, as the cut-off row does.
    """
    asked = 0
    while asked < CUT_ATTEMPTS:
        asked += 1
        session.ask("Tell me about pipelines.", STREAM_LIMIT)
        poll(
            session.last_reply,
            lambda r: r and (r["content"] or r["state"] in ("done", "stopped")),
            REPLY_WAIT_S,
            0.02,
        )
        session.shot("streaming")
        reply = session.wait_reply()
        tokens = re.match(r"(\d+) tokens", reply["meta"])
        if reply["finish"] == "length" or (tokens and int(tokens.group(1)) >= SHORT_REPLY):
            break
    samples = session.driver.execute_script("return window.chatSamples;")
    growing = sorted({length for _, length, state in samples if state == "streaming" and length})
    end = next((t for t, _, state in samples if state == "done"), None)
    session.shot("streamed")
    timing = re.search(r"first token [\d.]+ s · [\d.]+ tokens/s", reply["meta"])
    return Check(
        "chat page streams",
        "text grows before the reply ends; TTFT and tokens/s under it",
        f"{len(growing)} lengths shown while streaming, then {reply['state']}; "
        f"meta {reply['meta']!r}; asked {asked} time(s)",
        len(growing) >= 2 and end is not None and timing is not None,
    )


def cut_off_check(session: ChatSession, name: str = "chat cut-off note") -> Check:
    """A reply that reaches a low limit says so under it ("cut off at N tokens")."""
    for _attempt in range(CUT_ATTEMPTS):
        session.ask("Count from one to one hundred.", CUT_LIMIT)
        reply = session.wait_reply()
        if reply["finish"] == "length" or f"{CUT_LIMIT} tokens" in reply["meta"]:
            break
    session.shot("cut-off" if name == "chat cut-off note" else "mutant")
    expected = f"Cut off at {CUT_LIMIT} tokens"
    return Check(
        name,
        f'limit {CUT_LIMIT}: "{expected}" under the reply',
        f"finish {reply['finish'] or 'none'}, {reply['meta'].split(' · ')[0]}, "
        f"note {reply['note']!r}",
        reply["note"].startswith(expected),
    )


def context_check(session: ChatSession, max_model_len: int) -> Check:
    """The context meter shows the tokens used so far (vLLM's usage) of max_model_len."""
    text = session.driver.execute_script(
        'return document.getElementById("context-text").textContent;'
    )
    used = re.match(rf"(\d+) of {max_model_len} tokens", text)
    return Check(
        "chat context meter",
        f"tokens used of {max_model_len}, from usage",
        text,
        used is not None and int(used.group(1)) > 0,
    )


def wrong_key_check(session: ChatSession, api_key: str) -> Check:
    """A wrong key gets the page's 401 message; the key is in sessionStorage, not a cookie."""
    session.type_into("key", "wrong-" + api_key[6:])
    session.ask("Hello?", CUT_LIMIT)
    message = poll(session.notice, bool, REPLY_WAIT_S)
    session.shot("wrong-key")
    stored = session.driver.execute_script(
        'return [sessionStorage.getItem("gemma-graviton.apiKey"), document.cookie, location.href];'
    )
    kept = stored[0].startswith("wrong-") and stored[1] == "" and "wrong-" not in stored[2]
    session.type_into("key", api_key)
    return Check(
        "chat wrong key",
        "401 message shown; key in sessionStorage only",
        f"{message!r}; {'sessionStorage only' if kept else 'key seen elsewhere'}",
        "(401)" in message and kept,
    )


def new_chat_check(session: ChatSession) -> Check:
    """New chat empties the conversation and the context meter."""
    session.click("new-chat")
    left, meter = session.driver.execute_script(
        'return [document.querySelectorAll("#log article").length, '
        'document.getElementById("context-text").textContent];'
    )
    session.shot("new-chat")
    return Check(
        "chat New chat",
        "no messages, meter at 0",
        f"{left} messages, {meter!r}",
        left == 0 and meter.startswith("0 of"),
    )


def phone_check(session: ChatSession) -> Check:
    """At a phone's width nothing scrolls sideways and the controls stay on screen."""
    session.driver.set_window_size(*PHONE)
    session.ask("Hi.", CUT_LIMIT)
    session.wait_reply()
    width, inner, send_right = session.driver.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth, "
        'document.getElementById("send").getBoundingClientRect().right];'
    )
    session.shot("phone")
    return Check(
        "chat at phone width",
        f"{PHONE[0]} px wide: no sideways scroll, Send on screen",
        f"page {width} px in a {inner} px window, Send ends at {send_right:.0f} px",
        width <= inner and send_right <= inner,
    )


def chat_checks(gate: Gate, api_key: str, max_model_len: int, shots: Path) -> list[Check]:
    """Every row of the page against one gatekeeper, in a person's order."""
    shots.mkdir(parents=True, exist_ok=True)
    checks = [page_check(gate)]
    with browser_session() as driver:
        session = ChatSession(driver, gate.base_url, shots, [])
        session.open(api_key)
        session.shot("loaded")
        checks.append(stream_check(session))
        checks.append(cut_off_check(session))
        checks.append(context_check(session, max_model_len))
        checks.append(wrong_key_check(session, api_key))
        checks.append(new_chat_check(session))
        checks.append(phone_check(session))
    return checks


def mutant_files(files: Mapping[str, str]) -> dict[str, str]:
    """The page's files with the cut-off note's condition made never true."""
    script = files["chat-app.js"]
    if script.count(NOTE_CONDITION) != 1:
        raise RehearsalError(f"app.js no longer holds `{NOTE_CONDITION}` exactly once")
    return {**files, "chat-app.js": script.replace(NOTE_CONDITION, NOTE_MUTANT)}


def mutant_check(
    serve: Callable[[Mapping[str, str]], Any], files: Mapping[str, str], api_key: str, shots: Path
) -> Check:
    """The cut-off row against a page that drops `finish_reason: "length"` silently: it must
    fail. `serve(files)` is a context manager giving a gatekeeper that serves `files`."""
    with serve(mutant_files(files)) as door, browser_session() as driver:
        session = ChatSession(driver, door.base_url, shots, [])
        session.open(api_key)
        row = cut_off_check(session, "mutant")
    # Caught only if the reply did reach its limit: a reply that stopped short proves nothing.
    reached = row.observed.startswith("finish length")
    caught = reached and row.ok is False
    return Check(
        "chat cut-off mutant caught",
        f"`{NOTE_MUTANT}` in app.js: a reply at the limit, and the cut-off row fails",
        f"{'row failed' if row.ok is False else 'row passed'}: {row.observed}",
        caught,
    )
