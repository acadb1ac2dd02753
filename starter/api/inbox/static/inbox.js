// The supervisors' inbox (starter/api/inbox/pages.py): live updates from the server's event
// stream, Approve and Reject through the API's own POST /approvals/{id}, and the time left
// before each approval expires. No framework, no build step.
"use strict";

(() => {
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const approver = document.querySelector('meta[name="approver"]').content;
  const pending = document.getElementById("pending");
  const decided = document.getElementById("decided");
  const empty = document.getElementById("empty");
  const live = document.getElementById("live");
  const trouble = document.getElementById("trouble");
  const setTrouble = (text) => { trouble.textContent = text || ""; trouble.hidden = !text; };

  const rowOf = (id) => [...pending.querySelectorAll("li.approval")].find((li) => li.dataset.approvalId === id);
  const shown = (id) => rowOf(id) || [...decided.children].find((li) => li.dataset.approvalId === id);
  const showEmpty = () => { empty.hidden = pending.querySelector("li.approval") !== null; };
  // approval id -> what the stream said of it while this page's own decision was on its way (or null):
  // the supervisor reads what became of their own decision, not the stream's word for it
  const deciding = new Map();

  // An approval that can no longer be decided leaves the list, with what became of it.
  function finish(id, message) {
    const li = rowOf(id);
    if (!li) return;
    const decide = li.querySelector(".decide");
    if (decide) decide.remove();
    li.classList.add("finished");
    li.querySelector(".message").textContent = message;
    decided.prepend(li);
    showEmpty();
  }

  // How long before `iso`, as the server words it (starter/api/inbox/words.py time_left).
  function timeLeft(iso) {
    if (!iso) return "unknown";
    const seconds = Math.floor((Date.parse(iso) - Date.now()) / 1000);
    if (seconds <= 0) return "expiring now";
    const hours = Math.floor(seconds / 3600), minutes = Math.floor((seconds % 3600) / 60), secs = seconds % 60;
    if (hours >= 24) return `${Math.floor(hours / 24)} d ${hours % 24} h left`;
    if (hours) return `${hours} h ${minutes} min left`;
    if (minutes) return `${minutes} min ${secs} s left`;
    return `${secs} s left`;
  }
  function tick() {
    pending.querySelectorAll("li.approval").forEach((li) => {
      const cell = li.querySelector(".time-left");
      if (cell) cell.textContent = timeLeft(li.dataset.expiresAt);
    });
  }
  setInterval(tick, 1000);

  async function notice(id, params) {
    const query = new URLSearchParams(params).toString();
    const response = await fetch(`/ui/approvals/${encodeURIComponent(id)}/notice${query ? "?" + query : ""}`,
                                 {credentials: "same-origin"});
    if (response.status === 401) { window.location.assign("/ui/sign-in"); return null; }
    if (!response.ok) return null;
    return response.json();
  }

  async function decide(li, decision) {
    const id = li.dataset.approvalId;
    const buttons = li.querySelectorAll(".decide button");
    const message = li.querySelector(".message");
    const note = li.querySelector("textarea").value.trim();
    buttons.forEach((b) => { b.disabled = true; });
    deciding.set(id, null);
    message.textContent = decision === "approve" ? "Sending your approval…" : "Sending your rejection…";
    let answer = 0;
    try {
      const body = {decision, approver};
      if (note) body.note = note;
      const response = await fetch(`/approvals/${encodeURIComponent(id)}`, {
        method: "POST", credentials: "same-origin", body: JSON.stringify(body),
        headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf},
      });
      answer = response.status;
    } catch (err) {
      answer = 0;  // no answer at all
    }
    if (answer === 401) { window.location.assign("/ui/sign-in"); return; }
    let told = null;
    try { told = await notice(id, {decision, answer}); } catch (err) { told = null; }
    const heard = deciding.get(id);
    deciding.delete(id);
    if (told && told.final) {
      finish(id, told.message);
    } else if (heard) {
      finish(id, heard);
    } else {
      message.textContent = told ? told.message
        : "Your decision could not be confirmed: the service did not answer. This page shows it when it is taken.";
      buttons.forEach((b) => { b.disabled = false; });
    }
  }

  pending.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-decision]");
    if (button) decide(button.closest("li.approval"), button.dataset.decision);
  });

  // The tenant's approval changes, shared with every other supervisor's page.
  const stream = new EventSource("/ui/approvals/events");
  stream.onopen = () => { live.textContent = "Live: this list updates by itself."; };
  stream.onerror = () => {
    if (stream.readyState === EventSource.CLOSED) {
      live.textContent = "Live updates stopped; reloading…";
      setTimeout(() => window.location.reload(), 3000);  // an expired sign-in goes back to the sign-in page
    } else {
      live.textContent = "Live updates interrupted; reconnecting…";
    }
  };
  stream.addEventListener("approval.requested", (event) => {
    const data = JSON.parse(event.data);
    if (shown(data.approval_id)) return;
    pending.insertAdjacentHTML("beforeend", data.html);
    tick();
    showEmpty();
  });
  for (const type of ["approval.decided", "approval.expired", "approval.withdrawn"]) {
    stream.addEventListener(type, (event) => {
      const data = JSON.parse(event.data);
      if (deciding.has(data.approval_id)) deciding.set(data.approval_id, data.message);
      else finish(data.approval_id, data.message);
    });
  }
  // After a (re)connect: any row no longer pending ended while the page was not listening.
  stream.addEventListener("inbox.synced", (event) => {
    const data = JSON.parse(event.data);
    const still = new Set(data.pending);
    pending.querySelectorAll("li.approval").forEach(async (li) => {
      const id = li.dataset.approvalId;
      if (still.has(id)) return;
      const told = await notice(id, {});
      if (told && told.final) finish(id, told.message);
    });
    setTrouble(data.trouble);
  });
  stream.addEventListener("inbox.status", (event) => setTrouble(JSON.parse(event.data).trouble));
  showEmpty();
})();
