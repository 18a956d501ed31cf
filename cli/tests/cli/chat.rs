//! `runaii chat` fed lines on stdin: the transcript grows with each turn, `/reset` clears it, `/model`
//! switches, `/cost` is the running total, and a failed turn does not end the session.

use rust_decimal::Decimal;

use crate::run::{recorded_cost, usage_lines};
use crate::stack::runaii;
use runaii_testkit::MODEL;

#[test]
fn chat_keeps_the_transcript_resets_it_and_totals_the_cost() {
    let lines = "Say hi.\n/cost\nSay hi again.\n/reset\nSay hi.\n/model no-such-model\nHello?\n/bogus\n/exit\nnever sent\n";
    let run = runaii(&["chat", MODEL, "--max-tokens", "16", "--temperature", "0", "--system", "Be brief.", "-v"]).stdin(lines).run();
    assert_eq!(run.code, 0, "{}", run.stderr);
    let usage = usage_lines(&run.stderr);
    assert_eq!(usage.len(), 3, "three turns reached the model (the unknown model's did not): {}", run.stderr);
    let (first, second, third) = (&usage[0], &usage[1], &usage[2]);
    // The second turn carried the first exchange (a cut answer included: it is what the user saw); after
    // /reset the same line costs the same prompt as at the start.
    assert!(second.1 > first.1 + first.2, "the transcript was sent: {first:?} then {second:?}");
    assert_eq!(third.1, first.1, "a cleared transcript: {first:?} vs {third:?}");
    assert!(run.stderr.contains("session: 1 request,"), "/cost after one turn: {}", run.stderr);
    assert!(run.stderr.contains("does not exist"), "the failed turn was reported: {}", run.stderr);
    assert!(run.stderr.contains("unknown command \"/bogus\""), "{}", run.stderr);
    // The session's total is the ledger's, to the last digit.
    let ledger: Decimal = usage.iter().map(|(id, ..)| recorded_cost(id)).sum();
    let total = format!(
        "session: 3 requests, {} prompt + {} completion tokens, cost {} USD",
        first.1 + second.1 + third.1,
        first.2 + second.2 + third.2,
        ledger.normalize()
    );
    assert_eq!(run.stderr.trim_end().lines().last(), Some(total.as_str()), "{}", run.stderr);
    // The answers were streamed to stdout, each ending its line.
    assert!(run.stdout.ends_with('\n') && run.stdout.lines().count() >= 3, "{:?}", run.stdout);
}
