//! Prometheus' HTTP API answers (`/api/v1/query`, `/api/v1/query_range`),
//! read as a stream of series: each series is handed to the caller as soon
//! as it is parsed, its labels borrowed from the answer's bytes (only the
//! labels the mapping reads, `dcgm::KEYS`; the rest skipped unparsed), so a
//! 300,000-series answer never becomes 300,000 label maps.

use std::borrow::Cow;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use crate::ingest::dcgm::{KEYS, Labels};

/// One series of an answer, borrowed from it.
#[derive(Debug, Default)]
pub struct Series<'a> {
    /// The labels of `KEYS`, by position (owned only where the JSON escaped them).
    pub labels: [Option<Cow<'a, str>>; KEYS.len()],
    /// [unix seconds, "value"] (instant queries)
    pub value: Option<(f64, Cow<'a, str>)>,
    /// [[unix seconds, "value"], ...] (range queries)
    pub values: Vec<(f64, Cow<'a, str>)>,
}

impl Series<'_> {
    pub fn labels(&self) -> Labels<'_> {
        let mut l = Labels::default();
        for (slot, v) in l.0.iter_mut().zip(&self.labels) {
            *slot = v.as_deref();
        }
        l
    }

    pub fn name(&self) -> &str {
        self.labels[0].as_deref().unwrap_or("")
    }
}

/// Go's ParseFloat forms ("NaN", "+Inf"): Rust reads them all.
pub fn number(v: &str) -> Option<f64> {
    v.parse::<f64>().ok()
}

/// A series' `metric` map, into its label slots: the labels of `KEYS`,
/// the rest skipped unparsed.
struct MetricSeed<'s, 'de>(&'s mut [Option<Cow<'de, str>>; KEYS.len()]);

impl<'de> DeserializeSeed<'de> for MetricSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for MetricSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a label map")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            match Labels::key(&k) {
                Some(i) => self.0[i] = Some(map.next_value::<Cow<'de, str>>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// Reads one series into a slot reused for the whole answer (a series is
/// ~0.5 KB of label slots: filled in place, not moved per series).
struct SeriesSeed<'s, 'de>(&'s mut Series<'de>);

impl<'de> DeserializeSeed<'de> for SeriesSeed<'_, 'de> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for SeriesSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a series")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let s = self.0;
        s.labels.iter_mut().for_each(|l| *l = None);
        s.value = None;
        s.values.clear();
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            match &*k {
                "metric" => map.next_value_seed(MetricSeed(&mut s.labels))?,
                "value" => s.value = Some(map.next_value()?),
                "values" => s.values = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(())
    }
}

/// The most series one answer may hold: 2,000,000 is a query of seven
/// names (`NAMES_PER_QUERY`) over a 35,000-node, 8-GPU fleet. More is a
/// query that matches more than a fleet (every job's series of a shared
/// Prometheus): refused whole, before what was built from it can grow
/// without bound. (500,000 refused a 10,240-node fleet's first read.)
pub const MAX_SERIES: usize = 2_000_000;

/// The `result` array: each series to `each` as it is read.
struct ResultSeed<'f, F>(&'f mut F);

impl<'de, F: FnMut(&Series<'de>) -> Result<(), String>> DeserializeSeed<'de> for ResultSeed<'_, F> {
    type Value = usize;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<usize, D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de, F: FnMut(&Series<'de>) -> Result<(), String>> Visitor<'de> for ResultSeed<'_, F> {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a list of series")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<usize, A::Error> {
        let mut n = 0;
        let mut slot = Series::default();
        while let Some(()) = seq.next_element_seed(SeriesSeed(&mut slot))? {
            if n == MAX_SERIES {
                return Err(de::Error::custom(format_args!(
                    "more than {MAX_SERIES} series in one answer: narrow it with --prometheus-match"
                )));
            }
            // The reader may stop here (its budget spent, its deadline
            // passed): nothing more of the answer is read.
            (self.0)(&slot).map_err(de::Error::custom)?;
            n += 1;
        }
        Ok(n)
    }
}

/// `data`: its result type, and the series count.
struct DataSeed<'f, F> {
    each: &'f mut F,
    want: &'static str,
}

impl<'de, F: FnMut(&Series<'de>) -> Result<(), String>> DeserializeSeed<'de> for DataSeed<'_, F> {
    type Value = (String, usize);

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: FnMut(&Series<'de>) -> Result<(), String>> Visitor<'de> for DataSeed<'_, F> {
    type Value = (String, usize);

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("the answer's data")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut kind = String::new();
        let mut n = 0;
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            match &*k {
                "resultType" => kind = map.next_value()?,
                // Prometheus writes resultType first; a result of another
                // type is not read as series (the caller reports the type).
                "result" if kind.is_empty() || kind == self.want => {
                    n = map.next_value_seed(ResultSeed(&mut *self.each))?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok((kind, n))
    }
}

/// The whole answer.
struct AnswerSeed<'f, F> {
    each: &'f mut F,
    want: &'static str,
}

#[derive(Default)]
struct Head {
    status: String,
    data: Option<(String, usize)>,
    error_type: Option<String>,
    error: Option<String>,
}

impl<'de, F: FnMut(&Series<'de>) -> Result<(), String>> DeserializeSeed<'de> for AnswerSeed<'_, F> {
    type Value = Head;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Head, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, F: FnMut(&Series<'de>) -> Result<(), String>> Visitor<'de> for AnswerSeed<'_, F> {
    type Value = Head;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Prometheus API answer")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Head, A::Error> {
        let mut h = Head::default();
        while let Some(k) = map.next_key::<Cow<'de, str>>()? {
            match &*k {
                "status" => h.status = map.next_value()?,
                "data" => {
                    h.data = Some(map.next_value_seed(DataSeed {
                        each: &mut *self.each,
                        want: self.want,
                    })?)
                }
                "errorType" => h.error_type = map.next_value()?,
                "error" => h.error = map.next_value()?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if h.status.is_empty() {
            return Err(de::Error::missing_field("status"));
        }
        Ok(h)
    }
}

/// Why an answer was not read.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    #[error("not a Prometheus API answer ({0})")]
    NotJson(String),
    #[error("query failed: {kind}: {message}")]
    Query { kind: String, message: String },
    #[error("answer without data")]
    NoData,
    #[error("expected a {want}, got a {got}")]
    WrongType { want: &'static str, got: String },
    /// The reader stopped it (`each` said why).
    #[error("{0}")]
    Stopped(String),
}

/// Reads one answer whose result should be of type `want` ("vector",
/// "matrix"), handing each series to `each`; the number of series.
/// Series read before an error in the answer have been handed over: the
/// caller drops what it built from them when this fails.
pub fn read<'de>(
    body: &'de [u8],
    want: &'static str,
    mut each: impl FnMut(&Series<'de>) -> Result<(), String>,
) -> Result<usize, AnswerError> {
    let mut d = serde_json::Deserializer::from_slice(body);
    let mut stopped = None;
    let mut each = |s: &Series<'de>| each(s).inspect_err(|e| stopped = Some(e.clone()));
    let h = AnswerSeed { each: &mut each, want }
        .deserialize(&mut d)
        .and_then(|h| d.end().map(|()| h));
    let h = match (h, stopped) {
        (_, Some(why)) => return Err(AnswerError::Stopped(why)),
        (h, None) => h.map_err(|e| AnswerError::NotJson(e.to_string()))?,
    };
    if h.status != "success" {
        return Err(AnswerError::Query {
            kind: h.error_type.unwrap_or_else(|| "error".into()),
            message: h.error.unwrap_or_else(|| "(no message)".into()),
        });
    }
    let (kind, n) = h.data.ok_or(AnswerError::NoData)?;
    if kind != want {
        return Err(AnswerError::WrongType { want, got: kind });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_of_more_series_than_a_fleet_is_refused_whole() {
        let one = r#"{"metric":{"Hostname":"n"},"value":[1,"1"]}"#;
        let answer = |n: usize| {
            let series = vec![one; n].join(",");
            format!(r#"{{"status":"success","data":{{"resultType":"vector","result":[{series}]}}}}"#)
        };
        let ok = answer(MAX_SERIES);
        assert_eq!(read(ok.as_bytes(), "vector", |_| Ok(())), Ok(MAX_SERIES));
        let over = answer(MAX_SERIES + 1);
        let mut seen = 0;
        let e = read(over.as_bytes(), "vector", |_| {
            seen += 1;
            Ok(())
        })
        .expect_err("refused");
        assert!(e.to_string().contains("more than 2000000 series"), "{e}");
        assert_eq!(seen, MAX_SERIES, "nothing past the limit is handed over");
    }

    #[test]
    fn series_stream_out_with_their_known_labels_only() {
        let body = br#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"__name__":"DCGM_FI_DEV_GPU_UTIL","gpu":"0","Hostname":"n\"1","exported_job":"x"},"value":[1700000000.5,"87"]},
            {"metric":{"gpu":"1","instance":"n2:9400"},"value":[1700000000.5,"NaN"]}
        ]}}"#;
        let mut got = Vec::new();
        let n = read(body, "vector", |s| {
            let l = s.labels();
            got.push((
                s.name().to_string(),
                l.host().map(str::to_string),
                l.get("exported_job").is_none(),
                s.value.as_ref().and_then(|(_, v)| number(v)).map(|v| v.is_nan()),
            ));
            Ok(())
        })
        .expect("an answer");
        assert_eq!(n, 2);
        assert_eq!(
            got[0],
            ("DCGM_FI_DEV_GPU_UTIL".into(), Some("n\"1".into()), true, Some(false))
        );
        assert_eq!(got[1], (String::new(), Some("n2".into()), true, Some(true)));
    }

    #[test]
    fn errors_are_one_line_each() {
        let e = read(
            br#"{"status":"error","errorType":"bad_data","error":"parse error at char 3"}"#,
            "vector",
            |_| Ok(()),
        );
        assert_eq!(
            e.expect_err("an error").to_string(),
            "query failed: bad_data: parse error at char 3"
        );
        let e = read(
            br#"{"status":"success","data":{"resultType":"scalar","result":[1,"2"]}}"#,
            "vector",
            |_| Ok(()),
        );
        assert_eq!(e.expect_err("an error").to_string(), "expected a vector, got a scalar");
        let e = read(b"<html>oops</html>", "vector", |_| Ok(()));
        assert!(
            e.expect_err("an error")
                .to_string()
                .starts_with("not a Prometheus API answer")
        );
        let e = read(
            br#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{}"#,
            "vector",
            |_| Ok(()),
        );
        assert!(matches!(e, Err(AnswerError::NotJson(_))));
    }

    #[test]
    fn the_reader_stops_an_answer_where_it_says_and_says_why() {
        let one = r#"{"metric":{"Hostname":"n"},"value":[1,"1"]}"#;
        let body = format!(
            r#"{{"status":"success","data":{{"resultType":"vector","result":[{}]}}}}"#,
            vec![one; 100].join(",")
        );
        let mut seen = 0;
        let e = read(body.as_bytes(), "vector", |_| {
            seen += 1;
            if seen == 10 {
                Err("the refresh's budget is spent".into())
            } else {
                Ok(())
            }
        });
        assert_eq!(e, Err(AnswerError::Stopped("the refresh's budget is spent".into())));
        assert_eq!(seen, 10, "nothing read past the stop");
    }
}
