//! Compact, lossless encodings of the model's decimal readings for
//! recordings. Every `f64` the console holds came off the wire as an
//! integer in a fixed unit (mW, permille, hundredths of a percent, kB/s);
//! stored as that integer (a varint of 1 to 4 bytes) it costs a fraction of
//! an 8-byte float. A value that is not exactly such an integer (made by a
//! test, or a future source) is kept as the float: nothing is ever rounded.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

#[derive(Serialize, Deserialize)]
enum Num {
    /// The value is this integer in the field's unit.
    Units(i64),
    /// Anything else, as it was.
    Raw(f64),
}

/// How a field's value relates to its integer: `i / k` or `i * k`.
#[derive(Clone, Copy)]
enum Unit {
    Div(f64),
    Mul(f64),
}

impl Unit {
    fn value(self, i: i64) -> f64 {
        match self {
            Unit::Div(k) => i as f64 / k,
            Unit::Mul(k) => i as f64 * k,
        }
    }

    fn num(self, x: f64) -> Num {
        let i = match self {
            Unit::Div(k) => (x * k).round(),
            Unit::Mul(k) => (x / k).round(),
        };
        // Only integers a float holds exactly, and only if they give back
        // the very same bits.
        if i.is_finite() && i.abs() < 9.0e15 && self.value(i as i64).to_bits() == x.to_bits() {
            Num::Units(i as i64)
        } else {
            Num::Raw(x)
        }
    }

    fn decode(self, n: Num) -> f64 {
        match n {
            Num::Units(i) => self.value(i),
            Num::Raw(x) => x,
        }
    }
}

macro_rules! unit {
    ($name:ident, $unit:expr, $doc:literal) => {
        #[doc = $doc]
        pub mod $name {
            use super::*;

            const UNIT: Unit = $unit;

            pub fn serialize<S: Serializer>(x: &f64, s: S) -> Result<S::Ok, S::Error> {
                UNIT.num(*x).serialize(s)
            }

            pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
                Ok(UNIT.decode(Num::deserialize(d)?))
            }

            /// The same for an optional reading.
            pub mod opt {
                use super::*;

                pub fn serialize<S: Serializer>(x: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
                    x.map(|x| UNIT.num(x)).serialize(s)
                }

                pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
                    Ok(Option::<Num>::deserialize(d)?.map(|n| UNIT.decode(n)))
                }
            }
        }
    };
}

unit!(milli, Unit::Div(1000.0), "Thousandths: watts from mW.");
unit!(
    centi,
    Unit::Div(100.0),
    "Hundredths: percent from hundredths of a percent, load."
);
unit!(deci, Unit::Div(10.0), "Tenths: percent from permille.");
unit!(kilo, Unit::Mul(1000.0), "Thousands: bytes/s from kB/s.");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_values_become_integers_and_others_stay_as_they_were() {
        let u = Unit::Div(1000.0);
        assert!(matches!(u.num(f64::from(412_345u32) / 1000.0), Num::Units(412_345)));
        assert!(matches!(Unit::Mul(1000.0).num(f64::from(7u32) * 1000.0), Num::Units(7)));
        for x in [0.1 + 0.2, f64::NAN, f64::INFINITY, 1e300, -0.0] {
            let back = u.decode(u.num(x));
            assert_eq!(back.to_bits(), x.to_bits(), "{x}");
        }
    }
}
