//! The visible part of each page: what a person (or the browser adapter) reads and clicks —
//! header navigation, tables, links, forms and buttons — rendered from the same state the page
//! embeds as JSON. Every form posts `application/x-www-form-urlencoded` to the route the JSON
//! clients call; element ids (`add-to-cart`, `to-confirm`, `place-order`, `pay`, `next-page`,
//! `order-number`, …) are the stable handles the browser adapter uses.

use serde_json::Value;

/// The page's style sheet: a tidy shop page, no external resources.
pub const CSS: &str = r#"
*{box-sizing:border-box}body{margin:0;font-family:"Noto Sans CJK JP","Noto Sans JP","Hiragino Sans",sans-serif;background:#f5f5f5;color:#222;font-size:15px}
header{background:#bf0000;color:#fff;padding:0 32px;display:flex;align-items:center;height:56px;gap:28px}
header .logo{font-weight:700;font-size:20px;letter-spacing:.04em;color:#fff;text-decoration:none}
header nav a{color:#fff;text-decoration:none;margin-right:20px;font-size:14px}
main{max-width:880px;margin:28px auto;background:#fff;border-radius:8px;padding:28px 36px;box-shadow:0 1px 4px rgba(0,0,0,.08)}
h1{font-size:22px;margin:0 0 20px;padding-bottom:12px;border-bottom:2px solid #bf0000}
table{width:100%;border-collapse:collapse;margin:12px 0 20px}th,td{padding:10px 8px;border-bottom:1px solid #e5e5e5;text-align:left}
th{background:#fafafa;font-weight:600;font-size:13px;color:#555}td.num,th.num{text-align:right}
.total{font-size:20px;font-weight:700;color:#bf0000}
.button,button{display:inline-block;background:#bf0000;color:#fff;border:0;border-radius:6px;padding:11px 26px;font-size:15px;cursor:pointer;text-decoration:none}
.button.secondary,button.secondary{background:#fff;color:#bf0000;border:1px solid #bf0000}
.actions{display:flex;gap:14px;align-items:center;margin-top:18px}
label{display:block;font-weight:600;margin:14px 0 6px;font-size:13px;color:#555}
input,select,textarea{font:inherit;padding:8px;border:1px solid #ccc;border-radius:4px}textarea{width:100%;height:64px}
.item{display:flex;gap:28px}.item .photo{width:220px;height:220px;border-radius:8px;background:linear-gradient(135deg,#f3d7d7,#fbeeee);display:flex;align-items:center;justify-content:center;font-size:64px}
.price{font-size:24px;color:#bf0000;font-weight:700;margin:8px 0}
.stage{display:inline-block;background:#fff3e0;color:#a45a00;border-radius:12px;padding:3px 12px;font-size:13px}
.notice{background:#fff8e1;border-left:4px solid #f0b400;padding:12px 16px;margin:12px 0}
.error{background:#fdecea;border-left:4px solid #bf0000;padding:12px 16px}
.pager{display:flex;gap:16px;justify-content:center;margin-top:8px}
dl{display:grid;grid-template-columns:160px 1fr;gap:8px 12px}dt{color:#666}dd{margin:0}
footer{text-align:center;color:#999;font-size:12px;margin:20px 0 40px}
"#;

/// HTML-escapes text.
pub fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

fn s(v: &Value) -> String {
    match v {
        Value::String(t) => esc(t),
        Value::Null => String::new(),
        other => esc(&other.to_string()),
    }
}

fn yen(v: &Value) -> String {
    let n = v.as_i64().unwrap_or(0);
    let digits = n.abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    format!("{}{out} 円", if n < 0 { "-" } else { "" })
}

/// The page around a body: header navigation, `<main>` with the title, footer.
pub fn layout(title: &str, body: &str) -> String {
    format!(
        "<header><a class=\"logo\" href=\"/\">シミュレーション市場</a><nav><a href=\"/\">商品一覧</a><a id=\"nav-cart\" href=\"/cart\">買い物かご</a><a id=\"nav-orders\" href=\"/orders\">購入履歴</a></nav></header>\n<main>\n<h1>{}</h1>\n{body}\n</main>\n<footer>shop-sim — テスト用の模擬ショップです</footer>",
        esc(title)
    )
}

/// The body of a page, chosen by `state.page`.
pub fn body(state: &Value) -> String {
    match state["page"].as_str().unwrap_or("") {
        "home" => home(state),
        "item" => item(&state["item"]),
        "cart" => cart(&state["cart"]),
        "confirm" => confirm(&state["confirm"]),
        "order_complete" => complete(&state["order"]),
        "payment" => payment(state),
        "order_list" => order_list(state),
        "order_detail" => detail(&state["orderDetail"]),
        "login" => format!(
            "<p class=\"notice\" id=\"login-required\">{}</p><form><label>会員ID</label><input name=\"user\"><label>パスワード</label><input type=\"password\" name=\"password\"><div class=\"actions\"><button type=\"button\">ログイン</button></div></form>",
            s(&state["message"])
        ),
        "error" => format!(
            "<p class=\"error\" id=\"error-message\">{}</p><div class=\"actions\"><a class=\"button secondary\" href=\"/cart\">買い物かごへ戻る</a></div>",
            s(&state["error"]["message"])
        ),
        _ => String::new(),
    }
}

fn home(state: &Value) -> String {
    let rows: String = state["items"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|i| {
                    format!(
                        "<tr><td><a href=\"/items/{}\">{}</a></td><td class=\"num\">{}</td><td>{}</td></tr>",
                        s(&i["item_code"]),
                        s(&i["name"]),
                        yen(&i["price_yen"]),
                        if i["stock"].as_i64().unwrap_or(0) > 0 { "在庫あり" } else { "売り切れ" }
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<table><thead><tr><th>商品</th><th class=\"num\">価格（税込）</th><th>在庫</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

fn item(i: &Value) -> String {
    let variants = i["variants"].as_array().cloned().unwrap_or_default();
    let select = if variants.is_empty() {
        String::new()
    } else {
        let opts: String = variants
            .iter()
            .map(|v| format!("<option value=\"{0}\">{0}</option>", s(v)))
            .collect();
        format!(
            "<label for=\"variant_id\">種類</label><select id=\"variant_id\" name=\"variant_id\">{opts}</select>"
        )
    };
    let in_stock = i["stock"].as_i64().unwrap_or(0) > 0;
    format!(
        "<div class=\"item\"><div class=\"photo\">🛍</div><div><p>商品番号 {id}</p><p class=\"price\">{price}</p><p>{stock}</p>\
<form id=\"add-to-cart\" method=\"post\" action=\"/cart/add\"><input type=\"hidden\" name=\"item_id\" value=\"{id}\">{select}\
<label for=\"quantity\">数量</label><input id=\"quantity\" name=\"quantity\" type=\"number\" min=\"1\" value=\"1\">\
<div class=\"actions\"><button type=\"submit\" id=\"add-to-cart-button\">買い物かごに入れる</button></div></form></div></div>",
        id = s(&i["item_id"]),
        price = yen(&i["price_yen"]),
        stock = if in_stock {
            "在庫あり"
        } else {
            "売り切れ"
        },
    )
}

fn lines_table(lines: &Value) -> String {
    let rows: String = lines
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| {
                    format!(
                        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td></tr>",
                        s(&l["item_name"]),
                        s(&l["variant_id"]),
                        yen(&l["unit_price_yen"]),
                        s(&l["quantity"]),
                        yen(&l["line_total_yen"])
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    format!(
        "<table><thead><tr><th>商品</th><th>種類</th><th class=\"num\">単価</th><th class=\"num\">数量</th><th class=\"num\">小計</th></tr></thead><tbody>{rows}</tbody></table>"
    )
}

fn cart(c: &Value) -> String {
    let empty = c["lines"].as_array().is_none_or(Vec::is_empty);
    if empty {
        return "<p class=\"notice\" id=\"cart-empty\">買い物かごに商品はありません。</p><div class=\"actions\"><a class=\"button secondary\" href=\"/\">商品一覧へ</a></div>".into();
    }
    format!(
        "{}<p>商品合計 <span class=\"total\" id=\"subtotal\">{}</span></p><div class=\"actions\"><a class=\"button\" id=\"to-confirm\" href=\"/order/confirm\">ご購入手続きへ</a>\
<form method=\"post\" action=\"/cart/clear\"><button class=\"secondary\" type=\"submit\" id=\"clear-cart\">買い物かごを空にする</button></form></div>",
        lines_table(&c["lines"]),
        yen(&c["subtotal_yen"])
    )
}

fn confirm(c: &Value) -> String {
    let deadline = if c["pay_deadline"].is_string() {
        format!("<dt>お支払い期限</dt><dd>{}</dd>", s(&c["pay_deadline"]))
    } else {
        String::new()
    };
    format!(
        "{lines}<dl><dt>商品合計</dt><dd>{sub}</dd><dt>送料</dt><dd>{ship}</dd><dt>お支払い方法</dt><dd id=\"payment-method\">{method}</dd>{deadline}<dt>お支払い金額</dt><dd class=\"total\" id=\"payable\">{pay}</dd></dl>\
<form id=\"order-form\" method=\"post\" action=\"/order/submit\"><input type=\"hidden\" name=\"expected_payable_yen\" value=\"{pay_n}\">\
<label for=\"note\">備考欄</label><textarea id=\"note\" name=\"note\"></textarea>\
<div class=\"actions\"><button type=\"submit\" id=\"place-order\">注文を確定する</button><a class=\"button secondary\" href=\"/cart\">買い物かごへ戻る</a></div></form>",
        lines = lines_table(&c["lines"]),
        sub = yen(&c["subtotal_yen"]),
        ship = yen(&c["shipping_yen"]),
        method = s(&c["payment_method"]),
        pay = yen(&c["payable_yen"]),
        pay_n = s(&c["payable_yen"]),
    )
}

fn pay_form(o: &Value) -> String {
    if o["status"].as_str() == Some("ordered") {
        format!(
            "<form method=\"post\" action=\"/orders/{}/pay\"><button type=\"submit\" id=\"pay\">支払う</button></form>",
            s(&o["order_number"])
        )
    } else {
        String::new()
    }
}

fn order_dl(o: &Value) -> String {
    let items: Vec<String> = o["items"]
        .as_array()
        .map(|a| a.iter().map(|i| s(&i["item_name"])).collect())
        .unwrap_or_default();
    format!(
        "<dl><dt>注文番号</dt><dd id=\"order-number\">{}</dd><dt>注文日時</dt><dd>{}</dd><dt>ショップ</dt><dd>{}</dd><dt>商品</dt><dd>{}</dd><dt>お支払い金額</dt><dd class=\"total\">{}</dd><dt>状況</dt><dd><span class=\"stage\" id=\"stage\">{}</span></dd><dt>備考</dt><dd id=\"remark\">{}</dd></dl>",
        s(&o["order_number"]),
        s(&o["order_date"]),
        s(&o["shop_name"]),
        items.join("、"),
        yen(&o["payable_yen"]),
        s(&o["stage_label"]),
        s(&o["note"]),
    )
}

fn complete(o: &Value) -> String {
    format!(
        "<p class=\"notice\">ご注文を承りました。</p>{}<div class=\"actions\">{}<a class=\"button secondary\" id=\"to-detail\" href=\"/orders/{}\">注文詳細へ</a></div>",
        order_dl(o),
        pay_form(o),
        s(&o["order_number"])
    )
}

fn payment(state: &Value) -> String {
    let p = &state["payment"];
    let msg = match p["status"].as_str() {
        Some("paid") => "お支払いが完了しました。".to_owned(),
        Some("challenge_required") => format!(
            "本人認証（{}）が必要です。カード会社の画面で認証してください。",
            s(&p["challenge"])
        ),
        Some("awaiting_payment") => format!(
            "コンビニでお支払いください。払込票番号 {}、期限 {}",
            s(&p["slip_number"]),
            s(&p["pay_deadline"])
        ),
        _ => String::new(),
    };
    format!(
        "<p class=\"notice\" id=\"payment-status\">{msg}</p>{}",
        order_dl(&state["order"])
    )
}

fn order_list(state: &Value) -> String {
    let Some(d) = state.get("orderListData") else {
        return "<p class=\"notice\">購入履歴は新しい画面に移行しました。</p>".into();
    };
    let rows: String = d["orders"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|o| {
                    let items: Vec<String> = o["items"]
                        .as_array()
                        .map(|a| a.iter().map(|i| s(&i["item_name"])).collect())
                        .unwrap_or_default();
                    format!(
                        "<tr><td><a href=\"/orders/{n}\">{n}</a></td><td>{}</td><td>{}</td><td class=\"num\">{}</td><td><span class=\"stage\">{}</span></td><td>{}</td></tr>",
                        s(&o["order_date"]),
                        items.join("、"),
                        yen(&o["payable_yen"]),
                        s(&o["stage_label"]),
                        s(&o["note"]),
                        n = s(&o["order_number"]),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let page = d["page"].as_u64().unwrap_or(1);
    let total = d["total_pages"].as_u64().unwrap_or(1);
    let prev = if page > 1 {
        format!(
            "<a id=\"prev-page\" href=\"/orders?page={}\">← 前へ</a>",
            page - 1
        )
    } else {
        String::new()
    };
    let next = if page < total {
        format!(
            "<a id=\"next-page\" rel=\"next\" href=\"/orders?page={}\">次へ →</a>",
            page + 1
        )
    } else {
        String::new()
    };
    format!(
        "<table><thead><tr><th>注文番号</th><th>注文日時</th><th>商品</th><th class=\"num\">金額</th><th>状況</th><th>備考</th></tr></thead><tbody>{rows}</tbody></table><div class=\"pager\">{prev}<span>{page} / {total} ページ</span>{next}</div>"
    )
}

fn detail(d: &Value) -> String {
    if d["found"].as_bool() != Some(true) {
        return format!(
            "<p class=\"notice\" id=\"not-found\">注文 {} は見つかりません（反映まで時間がかかることがあります）。</p>",
            s(&d["order_number"])
        );
    }
    let o = &d["order"];
    format!(
        "{}<div class=\"actions\">{}<a class=\"button secondary\" href=\"/orders\">購入履歴へ</a></div>",
        order_dl(o),
        pay_form(o)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn yen_groups_thousands() {
        assert_eq!(yen(&json!(58000)), "58,000 円");
        assert_eq!(yen(&json!(980)), "980 円");
        assert_eq!(yen(&json!(1234567)), "1,234,567 円");
    }

    #[test]
    fn text_from_the_state_is_escaped() {
        let b = body(&json!({"page": "error", "error": {"message": "<script>x</script>"}}));
        assert!(b.contains("&lt;script&gt;") && !b.contains("<script>"));
    }
}
