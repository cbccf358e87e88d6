use super::history::HistoryAcc;
use super::*;

#[test]
fn queries_are_few_and_carry_the_match() {
    let p = Prometheus::new("http://p:9090/", Some("{job=\"dcgm\"}"), Some(Duration::from_secs(1))).expect("a value");
    let fast = p.queries(false);
    let full = p.queries(true);
    assert!(fast.len() <= 6, "{fast:?}");
    assert!(full.len() <= 16, "{full:?}");
    assert!(full.iter().all(|q| q.contains("job=\"dcgm\"")), "{full:?}");
    assert!(fast.iter().any(|q| q.contains("DCGM_FI_DEV_GPU_UTIL")));
    // Counters, clocks and the inventory are not asked every refresh.
    assert!(
        !fast
            .iter()
            .any(|q| q.contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION") || q.contains("UUID"))
    );
    assert!(full.iter().any(|q| q.contains("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION")));
    assert_eq!(p.url(), "http://p:9090");
    assert!(Prometheus::new("ftp://x", None, Some(Duration::from_secs(1))).is_err());
    assert!(Prometheus::new("not a url", None, Some(Duration::from_secs(1))).is_err());
}

#[test]
fn a_given_scrape_timeout_bounds_every_read_the_first_included() {
    let given = Prometheus::new("http://p:9090", None, Some(Duration::from_secs(2))).expect("ok");
    assert_eq!(given.first_timeout(), Duration::from_secs(2));
    assert_eq!(given.refresh_timeout(Duration::from_secs(10)), Duration::from_secs(2));
    // Not given: a large fleet's first read may take long, later ones
    // three times the slowest query.
    let default = Prometheus::new("http://p:9090", None, None).expect("ok");
    assert_eq!(default.first_timeout(), FIRST_READ_TIMEOUT);
    assert_eq!(
        default.refresh_timeout(Duration::from_secs(10)),
        Duration::from_secs(30)
    );
    assert_eq!(default.refresh_timeout(Duration::from_millis(10)), DEFAULT_TIMEOUT);
}

#[test]
fn a_range_answer_becomes_samples_per_node_and_step() {
    let json = br#"{"status":"success","data":{"resultType":"matrix","result":[
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","Hostname":"n1","instance":"a:9400"},
           "values":[[1700000000,"10"],[1700000005,"20"]]},
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_TEMP","gpu":"0","Hostname":"n1","instance":"a:9400"},
           "values":[[1700000005,"9223372036854775794"]]},
          {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"1","instance":"n2:9400"},
           "values":[[1700000005,"NaN"]]}
        ]}}"#;
    let mut h = HistoryAcc::default();
    promjson::read(json, "matrix", |s| {
        h.add(s);
        Ok(())
    })
    .expect("an answer");
    let h = h.finish(5000);
    let n1 = &h["n1"];
    assert_eq!(n1.len(), 2);
    assert_eq!(n1[0].time_ms, 1_700_000_000_000);
    assert_eq!(n1[0].gpus[0].util_pct, Some(10));
    assert_eq!(n1[1].gpus[0].util_pct, Some(20));
    assert_eq!(n1[1].gpus[0].temp_c, None);
    // n2 by its instance; a NaN is no reading.
    assert_eq!(h["n2"][0].gpus[0].util_pct, None);
}
