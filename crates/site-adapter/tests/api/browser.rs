use std::time::Duration;

use shop_sim::ShopConfig;
use site_adapter::driver::{BrowserPaths, installed};
use site_adapter::serve::{Kind, spawn};
use trading_worker::site::adapter::AdapterSite;
use trading_worker::site::adapter::check::Kit;

/// Runs the kit against an adapter of `kind` over a fresh shop; returns the failures.
async fn kit_against(kind: Kind) -> Vec<String> {
    let shop = shop_sim::spawn(ShopConfig::default()).await.unwrap();
    let adapter = spawn(kind, &shop.base_url, "sim-session", Duration::from_secs(30))
        .await
        .expect("adapter");
    let kit = Kit::new(
        AdapterSite::new(&adapter.url, Duration::from_secs(60)).unwrap(),
        &shop.base_url,
    );
    let results = tokio::time::timeout(Duration::from_secs(240), kit.run())
        .await
        .expect("the kit finishes within 4 minutes");
    adapter.stop().await;
    shop.stop().await;
    assert_eq!(results.len(), 10);
    results
        .iter()
        .filter(|r| !r.passed)
        .map(ToString::to_string)
        .collect()
}

#[tokio::test]
async fn conformance_kit_passes_against_the_shop_sim_http_adapter() {
    let failed = kit_against(Kind::Http).await;
    assert!(failed.is_empty(), "{failed:#?}");
}

#[test_util::lane(browser)]
#[tokio::test]
async fn conformance_kit_passes_against_the_shop_sim_browser_adapter() {
    assert!(
        installed(&BrowserPaths::default()),
        "/usr/bin/chromium and /usr/bin/chromedriver are required (apt-get install chromium chromium-driver)"
    );
    let failed = kit_against(Kind::Browser).await;
    assert!(failed.is_empty(), "{failed:#?}");
}
