//! The web console on the real app (real Postgres, Redis and worker): sign-in and sessions, the cookie's
//! attributes, the Content-Security-Policy, CSRF and origin checks on every POST, a revoked key or an
//! expired token ending its session, roles deciding what staff see and may do, a price change reaching
//! `/v1/models`, and a customer never seeing another tenant's data. The pages are driven as a browser
//! without JavaScript would (forms and links); `tests/console/` drives them in a real Chromium.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use std::time::Duration;

use common::{admin_token, create_key, grant, spawn_app, TestApp, ADMIN_SECRET, MODEL};
use reqwest::header::{HeaderMap, LOCATION, SET_COOKIE};
use reqwest::redirect::Policy;
use serde_json::{json, Value};

/// A cookie-keeping client that never follows redirects, so each answer can be checked.
struct Browser {
    base: String,
    http: reqwest::Client,
    cookies: Vec<(String, String)>,
}

struct Page {
    status: u16,
    headers: HeaderMap,
    body: String,
}

impl Page {
    fn location(&self) -> &str {
        self.headers.get(LOCATION).map_or("", |v| v.to_str().unwrap())
    }

    /// The session's CSRF token, from the first form that carries it.
    fn csrf(&self) -> String {
        field(&self.body, "csrf")
    }
}

/// The value of the first `<input name=NAME value=…>` in `html`.
fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let start = html.find(&marker).unwrap_or_else(|| panic!("no {name} field in:\n{html}")) + marker.len();
    html[start..].split('"').next().unwrap().to_owned()
}

impl Browser {
    fn new(app: &TestApp) -> Self {
        let http = reqwest::Client::builder().redirect(Policy::none()).timeout(Duration::from_secs(300)).build().unwrap();
        Self { base: app.base.clone(), http, cookies: Vec::new() }
    }

    fn cookie_header(&self) -> String {
        self.cookies.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join("; ")
    }

    fn keep_cookies(&mut self, headers: &HeaderMap) {
        for set in headers.get_all(SET_COOKIE) {
            let set = set.to_str().unwrap();
            let (pair, attributes) = set.split_once(';').unwrap_or((set, ""));
            let (name, value) = pair.split_once('=').unwrap();
            self.cookies.retain(|(k, _)| k != name);
            if !attributes.contains("Max-Age=0") {
                self.cookies.push((name.to_owned(), value.to_owned()));
            }
        }
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let response = request.header("cookie", self.cookie_header()).send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        self.keep_cookies(&headers);
        Page { status, headers, body: response.text().await.unwrap() }
    }

    async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    async fn post(&mut self, path: &str, form: &[(&str, &str)], extra: &[(&str, &str)]) -> Page {
        let mut request = self.http.post(format!("{}{path}", self.base)).form(form);
        for (k, v) in extra {
            request = request.header(*k, *v);
        }
        self.send(request).await
    }

    /// Signs in with `credential`; returns the answer to the form's POST.
    async fn sign_in(&mut self, credential: &str) -> Page {
        let form = self.get("/console/sign-in").await;
        assert_eq!(form.status, 200);
        let token = field(&form.body, "login_csrf");
        self.post("/console/sign-in", &[("credential", credential), ("login_csrf", token.as_str())], &[]).await
    }

    /// Signs in and checks that it worked; returns where it landed.
    async fn signed_in(&mut self, credential: &str) -> String {
        let answer = self.sign_in(credential).await;
        assert_eq!(answer.status, 303, "sign-in refused: {}", answer.body);
        answer.location().to_owned()
    }
}

fn tiny() -> Value {
    json!({"model": MODEL, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4, "temperature": 0})
}

async fn key_count(app: &TestApp) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM api_keys WHERE tenant_id = $1").bind(app.tenant_id).fetch_one(&app.db).await.unwrap()
}

#[tokio::test]
async fn a_key_signs_in_to_a_strict_session_under_a_strict_policy() {
    let app = spawn_app().await;
    let mut browser = Browser::new(&app);

    let form = browser.get("/console/sign-in").await;
    let csp = form.headers["content-security-policy"].to_str().unwrap();
    for directive in ["default-src 'self'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'", "form-action 'self'"] {
        assert!(csp.contains(directive), "{directive} missing from {csp}");
    }
    assert!(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"), "{csp}");
    assert_eq!(form.headers["x-frame-options"], "DENY");
    assert_eq!(form.headers["cache-control"], "no-store");
    // No inline script or style in the page: every script has a src, no element has a style.
    assert!(!form.body.contains("<script>") && !form.body.contains("style=") && !form.body.contains("<style"), "{}", form.body);

    let answer = browser.sign_in(&app.key).await;
    assert_eq!(answer.status, 303, "{}", answer.body);
    assert_eq!(answer.location(), "/console/account");
    let cookie = answer.headers.get_all(SET_COOKIE).iter().map(|v| v.to_str().unwrap()).find(|c| c.starts_with("runaii_console=")).unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
        assert!(cookie.contains(attribute), "{attribute} missing from {cookie}");
    }
    assert!(!cookie.contains(&app.key) && !answer.location().contains("rk-"), "the key never leaves in a cookie or URL");

    let page = browser.get("/console/account").await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains(&app.tenant) && page.body.contains("100 USD"), "{}", page.body);
    assert!(!page.body.contains(&app.key), "the key is never rendered");
    // The stylesheet and script the page names are served, from this origin, cacheable.
    let css = page.body.split("href=\"/console/assets/").nth(1).unwrap().split('"').next().unwrap().to_owned();
    let asset = browser.get(&format!("/console/assets/{css}")).await;
    assert_eq!(asset.status, 200);
    assert!(asset.headers["content-type"].to_str().unwrap().starts_with("text/css"));
    assert!(asset.headers["cache-control"].to_str().unwrap().contains("immutable"));

    // A wrong key is refused with the API's reason, and no session is opened.
    let mut stranger = Browser::new(&app);
    let refused = stranger.sign_in("rk-abcdefabcdef-nope").await;
    assert_eq!(refused.status, 401);
    assert!(refused.body.contains("unknown, revoked or expired"), "{}", refused.body);
    assert_eq!(stranger.get("/console/account").await.location(), "/console/sign-in?ended=none");

    // Signing in again replaces the session: the old id opens nothing (no fixation, no leftovers).
    let first = browser.cookie_header();
    browser.signed_in(&app.key).await;
    let replay = reqwest::Client::builder().redirect(Policy::none()).build().unwrap();
    let old = replay.get(format!("{}/console/account", app.base)).header("cookie", first).send().await.unwrap();
    assert_eq!(old.status(), 303);
    let page = browser.get("/console/account").await;
    assert_eq!(page.status, 200);

    // Sign-out deletes the session: the old cookie opens nothing.
    let stolen = browser.cookie_header();
    let csrf = page.csrf();
    assert_eq!(browser.post("/console/sign-out", &[("csrf", csrf.as_str())], &[]).await.status, 303);
    let after = replay.get(format!("{}/console/account", app.base)).header("cookie", stolen).send().await.unwrap();
    assert_eq!(after.status(), 303);
}

#[tokio::test]
async fn posts_need_the_sessions_csrf_token_and_this_origin() {
    let app = spawn_app().await;
    let mut browser = Browser::new(&app);
    browser.signed_in(&app.key).await;
    let csrf = browser.get("/console/keys").await.csrf();
    let before = key_count(&app).await;
    let zeros = "00".repeat(32);
    let forged = [
        ("no token", vec![("name", "x")], vec![]),
        ("another session's token", vec![("name", "x"), ("csrf", zeros.as_str())], vec![]),
        ("another origin", vec![("name", "x"), ("csrf", csrf.as_str())], vec![("origin", "http://evil.example")]),
        ("a cross-site fetch", vec![("name", "x"), ("csrf", csrf.as_str())], vec![("sec-fetch-site", "cross-site")]),
    ];
    for (what, form, headers) in forged {
        let answer = browser.post("/console/keys", &form, &headers).await;
        assert_eq!(answer.status, 403, "{what}: {}", answer.body);
        assert!(answer.body.contains("reload the page"), "{what}: {}", answer.body);
    }
    assert_eq!(key_count(&app).await, before, "no forged form changed anything");

    // The login form has its own token: a sign-in posted from elsewhere is refused.
    let mut other = Browser::new(&app);
    let answer = other.post("/console/sign-in", &[("credential", app.key.as_str()), ("login_csrf", "forged")], &[]).await;
    assert_eq!(answer.status, 403);

    // With the token, from this origin, it works, and the secret is shown once.
    let host = app.base.trim_start_matches("http://").to_owned();
    let origin = format!("http://{host}");
    let made = browser.post("/console/keys", &[("name", "ci"), ("csrf", csrf.as_str())], &[("origin", origin.as_str())]).await;
    assert_eq!(made.status, 200, "{}", made.body);
    assert_eq!(key_count(&app).await, before + 1);
    let secret = made.body.split("id=\"new-secret\">").nth(1).unwrap().split('<').next().unwrap().to_owned();
    assert!(secret.starts_with("rk-"), "{secret}");
    assert!(!browser.get("/console/keys").await.body.contains(&secret), "the secret is shown once");
    let actor: String = sqlx::query_scalar("SELECT actor FROM audit_log WHERE action = 'key.create' ORDER BY id DESC LIMIT 1")
        .fetch_one(&app.db)
        .await
        .unwrap();
    assert!(actor.starts_with("key:rk-"), "{actor}");
}

#[tokio::test]
async fn a_customer_never_sees_another_tenants_data() {
    let app = spawn_app().await;
    let other_key = create_key(&app.db, "other-tenant").await;
    grant(&app.db, "other-tenant", "5").await;
    let (status, _, mine) = app.post_json("/v1/chat/completions", &tiny()).await;
    assert_eq!(status, 200);
    let theirs = app.post_as(&other_key, "/v1/chat/completions", &tiny(), &[]).await;
    assert_eq!(theirs.status(), 200);
    let theirs = theirs.headers()["x-request-id"].to_str().unwrap().to_owned();
    let their_key_id: uuid::Uuid =
        sqlx::query_scalar("SELECT api_key_id FROM cost_records WHERE request_id = $1").bind(&theirs).fetch_one(&app.db).await.unwrap();

    let mut browser = Browser::new(&app);
    browser.signed_in(&app.key).await;
    let requests = browser.get("/console/requests").await;
    assert!(requests.body.contains(&mine), "{}", requests.body);
    assert!(!requests.body.contains(&theirs));
    assert_eq!(browser.get(&format!("/console/requests/{mine}")).await.status, 200);
    let detail = browser.get(&format!("/console/requests/{theirs}")).await;
    assert_eq!(detail.status, 404, "another tenant's request is not found: {}", detail.body);
    let keys = browser.get("/console/keys").await;
    assert!(!keys.body.contains(&their_key_id.to_string()) && !keys.body.contains("other-tenant"));
    let overview = browser.get("/console/account").await;
    assert!(!overview.body.contains("other-tenant") && !overview.body.contains("5 USD"));

    // Revoking another tenant's key is "not found", and the key keeps working.
    let csrf = keys.csrf();
    let answer = browser.post("/console/keys/revoke", &[("key_id", their_key_id.to_string().as_str()), ("csrf", csrf.as_str())], &[]).await;
    assert_eq!(answer.status, 404, "{}", answer.body);
    let revoked: Option<chrono::DateTime<chrono::Utc>> =
        sqlx::query_scalar("SELECT revoked_at FROM api_keys WHERE id = $1").bind(their_key_id).fetch_one(&app.db).await.unwrap();
    assert!(revoked.is_none());
    // Staff pages are not a customer's either.
    let staff_page = browser.get("/console/finance/costs").await;
    assert_eq!(staff_page.status, 403);
    assert!(!staff_page.body.contains(&theirs));
}

#[tokio::test]
async fn revoking_the_key_or_the_token_expiring_ends_the_session() {
    let app = spawn_app().await;
    let second = create_key(&app.db, &app.tenant).await;
    let mut browser = Browser::new(&app);
    browser.signed_in(&second).await;
    let keys = browser.get("/console/keys").await;
    let public_id = second.split('-').nth(1).unwrap();
    let key_id: uuid::Uuid =
        sqlx::query_scalar("SELECT id FROM api_keys WHERE public_id = $1").bind(public_id).fetch_one(&app.db).await.unwrap();
    let answer =
        browser.post("/console/keys/revoke", &[("key_id", key_id.to_string().as_str()), ("csrf", keys.csrf().as_str())], &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    // The key cache (300 ms in tests) forgets the key; the next page is the sign-in page.
    tokio::time::sleep(Duration::from_millis(600)).await;
    let after = browser.get("/console/account").await;
    assert_eq!((after.status, after.location()), (303, "/console/sign-in?ended=refused"));
    assert!(browser.get("/console/sign-in?ended=refused").await.body.contains("no longer accepts"));

    // A token's session ends with the token.
    let claims = runaii_gateway::admin::Claims::new("brief", vec!["ops".into()], None, 2);
    let short = runaii_gateway::admin::issue(ADMIN_SECRET, &claims).unwrap();
    let mut staff = Browser::new(&app);
    assert_eq!(staff.signed_in(&short).await, "/console/ops/models");
    assert_eq!(staff.get("/console/ops/models").await.status, 200);
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = staff.get("/console/ops/models").await;
    assert_eq!((after.status, after.location()), (303, "/console/sign-in?ended=expired"));
    assert!(staff.get("/console/sign-in?ended=expired").await.body.contains("admin token expired"));
    assert_eq!(staff.get("/console/ops/models").await.location(), "/console/sign-in?ended=none", "the session is gone");
}

#[tokio::test]
async fn roles_decide_what_staff_see_and_do_and_a_price_change_reaches_the_catalog() {
    let app = spawn_app().await;

    // Ops: the catalog and workers, not finance.
    let mut ops = Browser::new(&app);
    assert_eq!(ops.signed_in(&admin_token(&["ops"], None)).await, "/console/ops/models");
    let catalog = ops.get("/console/ops/models").await;
    assert_eq!(catalog.status, 200);
    assert!(catalog.body.contains(MODEL) && catalog.body.contains("0.3"), "{}", catalog.body);
    assert!(!catalog.body.contains("/console/finance/costs"), "no finance link for ops");
    let workers = ops.get("/console/ops/workers").await;
    assert!(workers.body.contains(&common::worker().url) && workers.body.contains("ready"), "{}", workers.body);
    let refused = ops.get("/console/finance/costs").await;
    assert_eq!(refused.status, 403, "{}", refused.body);
    assert!(refused.body.contains("finance"), "the API's reason is shown: {}", refused.body);

    // A price change: reviewed (nothing written yet), then confirmed.
    let csrf = catalog.csrf();
    let form = [
        ("id", MODEL),
        ("input_price", "0.25"),
        // As the form shows it: equal to the input price, so it follows the input price.
        ("cached_input_price", "0.1"),
        ("output_price", "0.75"),
        ("context_length", "4096"),
        ("owned_by", "runaii"),
        ("enabled", "true"),
        ("public", "true"),
        ("structured", "true"),
        ("schema_in_prompt", "true"),
        ("csrf", csrf.as_str()),
    ];
    let review = ops.post("/console/ops/models/review", &form, &[]).await;
    assert_eq!(review.status, 200, "{}", review.body);
    assert!(review.body.contains("Input price") && review.body.contains("0.25") && review.body.contains("Confirm"), "{}", review.body);
    let listed: Value = reqwest::get(format!("{}/v1/models/{MODEL}", app.base)).await.unwrap().json().await.unwrap();
    assert_eq!(listed["pricing"]["input_per_million_tokens"], "0.1", "a review writes nothing");
    let applied = ops.post("/console/ops/models/apply", &form, &[]).await;
    assert_eq!(applied.status, 303, "{}", applied.body);
    let listed: Value = reqwest::get(format!("{}/v1/models/{MODEL}", app.base)).await.unwrap().json().await.unwrap();
    assert_eq!(listed["pricing"]["input_per_million_tokens"], "0.25");
    assert_eq!(listed["pricing"]["output_per_million_tokens"], "0.75");
    assert_eq!(listed["pricing"]["cached_input_per_million_tokens"], "0.25", "an untouched cached price follows the input price");
    let (actor, action): (String, String) =
        sqlx::query_as("SELECT actor, action FROM audit_log WHERE target_type = 'model' ORDER BY id DESC LIMIT 1")
            .fetch_one(&app.db)
            .await
            .unwrap();
    assert_eq!((actor.as_str(), action.as_str()), ("tester", "model.update"));
    // A bad price is the API's refusal, shown beside the form; nothing changes.
    let bad = [("input_price", "-1")].into_iter().chain(form.iter().copied().filter(|(k, _)| *k != "input_price")).collect::<Vec<_>>();
    let refused = ops.post("/console/ops/models/apply", &bad, &[]).await;
    assert_eq!(refused.status, 400, "{}", refused.body);
    assert!(refused.body.contains("at least 0"), "{}", refused.body);

    // Finance: records and totals, not the catalog; a confined token sees its tenant only.
    let other_key = create_key(&app.db, "someone-else").await;
    grant(&app.db, "someone-else", "5").await;
    let (status, _, mine) = app.post_json("/v1/chat/completions", &tiny()).await;
    assert_eq!(status, 200);
    let theirs = app.post_as(&other_key, "/v1/chat/completions", &tiny(), &[]).await.headers()["x-request-id"].to_str().unwrap().to_owned();
    let mut finance = Browser::new(&app);
    assert_eq!(finance.signed_in(&admin_token(&["finance"], None)).await, "/console/finance/costs");
    let costs = finance.get("/console/finance/costs").await;
    assert!(costs.body.contains(&mine) && costs.body.contains(&theirs), "{}", costs.body);
    assert_eq!(finance.get("/console/ops/models").await.status, 403);
    let mut confined = Browser::new(&app);
    confined.signed_in(&admin_token(&["finance"], Some(app.tenant_id))).await;
    let costs = confined.get("/console/finance/costs").await;
    assert!(costs.body.contains(&mine) && !costs.body.contains(&theirs), "{}", costs.body);
    let totals = confined.get("/console/finance/totals").await;
    assert!(!totals.body.contains("someone-else"), "{}", totals.body);
    assert!(!confined.get("/console/finance/tenants").await.body.contains("Grant credit"), "a confined token mints nothing");

    // The console's CSV is the admin API's, byte for byte.
    let month = chrono::Utc::now().format("%Y-%m").to_string();
    let csv = finance.get(&format!("/console/finance/costs.csv?month={month}")).await;
    assert_eq!(csv.status, 200);
    assert!(csv.headers["content-type"].to_str().unwrap().starts_with("text/csv"));
    let (_, api_csv) = app
        .admin(reqwest::Method::GET, &format!("/admin/v1/cost-records?format=csv&month={month}"), &admin_token(&["finance"], None), None)
        .await;
    assert_eq!(Value::String(csv.body), api_csv);

    // Admin: grants through the console land in the ledger, exactly.
    let mut admin = Browser::new(&app);
    admin.signed_in(&admin_token(&["admin", "finance"], None)).await;
    let tenants = admin.get("/console/finance/tenants").await;
    let tenant = app.tenant_id.to_string();
    let granted = admin
        .post(
            "/console/finance/grants",
            &[("tenant_id", tenant.as_str()), ("amount", "2.5000000001"), ("note", "goodwill"), ("csrf", tenants.csrf().as_str())],
            &[],
        )
        .await;
    assert_eq!(granted.status, 200, "{}", granted.body);
    let ledger = admin.get(&format!("/console/finance/ledger?tenant_id={tenant}")).await;
    assert!(ledger.body.contains("2.5000000001") && ledger.body.contains("goodwill"), "{}", ledger.body);
    let audit = admin.get("/console/ops/audit").await;
    assert!(audit.body.contains("credits.grant") && audit.body.contains("model.update"), "{}", audit.body);
}

#[tokio::test]
async fn the_playground_answers_with_the_schema_and_its_recorded_cost() {
    let app = spawn_app().await;
    let mut browser = Browser::new(&app);
    browser.signed_in(&app.key).await;
    let form = browser.get("/console/playground").await;
    assert!(form.body.contains("invoice_number"), "the form starts from the invoice example");
    let schema = field_text(&form.body, "schema");
    let answer = browser
        .post(
            "/console/playground",
            &[
                ("model", MODEL),
                ("system", "Extract the invoice fields."),
                ("user", "Invoice #A-1024, due 2026-11-01, total 420.00 USD."),
                ("schema", schema.as_str()),
                ("max_tokens", "200"),
                ("temperature", "0"),
                ("csrf", form.csrf().as_str()),
            ],
            &[],
        )
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    assert!(answer.body.contains("Valid against the schema"), "{}", answer.body);
    let id = answer.body.split("id=\"answer-id\">").nth(1).unwrap().split('<').next().unwrap().to_owned();
    let cost = answer.body.split("id=\"answer-cost\">").nth(1).unwrap().split('<').next().unwrap().to_owned();
    let recorded: rust_decimal::Decimal =
        sqlx::query_scalar("SELECT cost FROM cost_records WHERE request_id = $1").bind(&id).fetch_one(&app.db).await.unwrap();
    assert_eq!(cost, recorded.normalize().to_string());

    // A schema that is not JSON is named, and nothing is sent.
    let refused = browser
        .post(
            "/console/playground",
            &[("model", MODEL), ("user", "x"), ("schema", "{"), ("max_tokens", "5"), ("temperature", "0"), ("csrf", form.csrf().as_str())],
            &[],
        )
        .await;
    assert_eq!(refused.status, 400);
    assert!(refused.body.contains("not valid JSON"), "{}", refused.body);
}

/// The text of `<textarea name=NAME>`, unescaped.
fn field_text(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\"");
    let start = html.find(&marker).unwrap();
    let text = html[start..].split_once('>').unwrap().1.split("</textarea>").next().unwrap();
    text.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
}

/// The text of `<code id="new-secret">…</code>`: a new key's secret, shown once.
fn new_secret(html: &str) -> String {
    let start = html.find("id=\"new-secret\">").unwrap_or_else(|| panic!("no new secret in:\n{html}")) + "id=\"new-secret\">".len();
    html[start..].split('<').next().unwrap().to_owned()
}

#[tokio::test]
async fn a_key_made_in_the_console_is_bounded_by_the_session_s_key_and_revoked_with_it() {
    let app = spawn_app().await;
    let token = admin_token(&["admin"], None);
    let expires = (chrono::Utc::now() + chrono::Duration::days(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let spec = json!({"name": "short-lived", "expires_at": expires, "rpm_limit": 10, "tpm_limit": 5000});
    let (status, parent) =
        app.admin(reqwest::Method::POST, &format!("/admin/v1/tenants/{}/keys", app.tenant_id), &token, Some(&spec)).await;
    assert_eq!(status, 200, "{parent}");

    let mut browser = Browser::new(&app);
    browser.signed_in(parent["key"].as_str().unwrap()).await;
    let keys = browser.get("/console/keys").await;
    let made = browser.post("/console/keys", &[("name", "minted"), ("csrf", keys.csrf().as_str())], &[]).await;
    assert_eq!(made.status, 200, "{}", made.body);
    let child = new_secret(&made.body);
    let row = |public_id: String| {
        let db = app.db.clone();
        async move {
            sqlx::query_as::<_, (uuid::Uuid, Option<chrono::DateTime<chrono::Utc>>, Option<i32>, Option<i32>, Option<uuid::Uuid>)>(
                "SELECT id, expires_at, rpm_limit, tpm_limit, parent_key_id FROM api_keys WHERE public_id = $1",
            )
            .bind(public_id)
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    let parent_id: uuid::Uuid = parent["id"].as_str().unwrap().parse().unwrap();
    let (child_id, child_expires, rpm, tpm, child_parent) = row(child.split('-').nth(1).unwrap().to_owned()).await;
    assert_eq!(child_expires.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)), Some(expires), "no later than its parent");
    assert_eq!((rpm, tpm, child_parent), (Some(10), Some(5000), Some(parent_id)));

    // A key minted from the minted key is bounded the same way.
    let mut second = Browser::new(&app);
    second.signed_in(&child).await;
    let keys = second.get("/console/keys").await;
    let made = second.post("/console/keys", &[("name", "grandchild"), ("csrf", keys.csrf().as_str())], &[]).await;
    let grandchild = new_secret(&made.body);
    let (grandchild_id, _, rpm, _, grandparent) = row(grandchild.split('-').nth(1).unwrap().to_owned()).await;
    assert_eq!((rpm, grandparent), (Some(10), Some(child_id)));

    // Revoking the first key with its minted keys (the form's default) revokes all three.
    let keys = browser.get("/console/keys").await;
    let answer = browser
        .post("/console/keys/revoke", &[("key_id", parent_id.to_string().as_str()), ("cascade", "on"), ("csrf", keys.csrf().as_str())], &[])
        .await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let revoked: Vec<uuid::Uuid> =
        sqlx::query_scalar("SELECT id FROM api_keys WHERE revoked_at IS NOT NULL ORDER BY created_at").fetch_all(&app.db).await.unwrap();
    assert_eq!(revoked, vec![parent_id, child_id, grandchild_id]);
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(app.post_as(&grandchild, "/v1/chat/completions", &tiny(), &[]).await.status(), 401);
    assert_eq!(app.post("/v1/chat/completions", &tiny()).await.status(), 200, "the tenant's other key still works");
}

/// Inserts a batch of the tenant of `key` straight into the database, `validating` under a lease no runner
/// takes before the test ends (so it stays as it is until cancelled).
async fn validating_batch(app: &TestApp, key: &str, id: &str) {
    let (tenant, key_id): (uuid::Uuid, uuid::Uuid) =
        sqlx::query_as("SELECT tenant_id, id FROM api_keys WHERE public_id = $1").bind(&key[3..15]).fetch_one(&app.db).await.unwrap();
    sqlx::query(
        "INSERT INTO batches (id, tenant_id, api_key_id, endpoint, input_file_id, completion_window, status, expires_at, leased_until)
         VALUES ($1, $2, $3, '/v1/chat/completions', 'file-x', '24h', 'validating', now() + interval '1 day', now() + interval '1 hour')",
    )
    .bind(id)
    .bind(tenant)
    .bind(key_id)
    .execute(&app.db)
    .await
    .unwrap();
}

#[tokio::test]
async fn a_customer_sees_and_cancels_its_own_batches_only() {
    let app = spawn_app().await;
    let other_key = create_key(&app.db, "other-tenant").await;
    validating_batch(&app, &app.key, "batch_mine").await;
    validating_batch(&app, &other_key, "batch_theirs").await;

    let mut browser = Browser::new(&app);
    browser.signed_in(&app.key).await;
    let page = browser.get("/console/batches").await;
    assert_eq!(page.status, 200);
    assert!(page.body.contains("batch_mine") && page.body.contains("validating"), "{}", page.body);
    assert!(!page.body.contains("batch_theirs"));
    let csrf = page.csrf();
    let answer = browser.post("/console/batches/cancel", &[("batch_id", "batch_theirs"), ("csrf", csrf.as_str())], &[]).await;
    assert_eq!(answer.status, 404, "another tenant's batch is not found: {}", answer.body);
    let answer = browser.post("/console/batches/cancel", &[("batch_id", "batch_mine"), ("csrf", csrf.as_str())], &[]).await;
    assert_eq!(answer.status, 200, "{}", answer.body);
    let statuses: Vec<(String, String)> = sqlx::query_as("SELECT id, status FROM batches ORDER BY id").fetch_all(&app.db).await.unwrap();
    assert_eq!(statuses[0].0, "batch_mine");
    assert_ne!(statuses[0].1, "validating", "cancelled");
    assert_eq!(statuses[1], ("batch_theirs".to_owned(), "validating".to_owned()));
}
