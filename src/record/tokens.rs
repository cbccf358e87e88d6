//! A value written as what serde visits (numbers, strings, raw float bits),
//! each predicted from the same place in the node's earlier samples and
//! written as what the prediction missed (`memory::Memory` predicts).
//!
//! "The same place" is the value's path: field, element and variant
//! numbers from the root (`gpus[3].nvlink_tx_kib[5]`), hashed. Paths, not
//! positions, so a sample that carries NVLink counters (every few seconds)
//! or one more process does not shift every later reading out of line with
//! the last sample's.
//!
//! Like postcard, the format is not self-describing: the reader is given
//! the type and walks the same paths in the same order, so it can make the
//! same predictions. Lengths, `Option` tags and enum variants are numbers
//! too. Floats that are whole thousandths of their unit are numbers, exact;
//! any other float (NaN, -0.0, 0.1 + 0.2) travels as its 64 bits.

use serde::de::{self, DeserializeSeed, IntoDeserializer, Visitor};
use serde::ser::{self, Serialize};

use crate::record::memory::{Memory, Packed};

/// What a number at a path is: keeps a length from predicting the value
/// that shares its path.
#[derive(Clone, Copy)]
enum Kind {
    Value = 0,
    Tag = 1,
    Len = 2,
    Variant = 3,
    Float = 4,
    Str = 5,
    Raw = 6,
}

/// A float number that means "the bits are the next raw"; even numbers are
/// twice the value in thousandths.
const RAW_FLOAT: i64 = 1;
/// Thousandths above this are not kept as integers (f64 is exact to 2^53).
const MAX_MILLIS: f64 = (1u64 << 52) as f64;

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Error(String);

impl ser::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

impl de::Error for Error {
    fn custom<T: std::fmt::Display>(msg: T) -> Self {
        Error(msg.to_string())
    }
}

/// FNV-1a over the path and the kind: the key predictions are kept under.
/// A collision only makes one prediction worse, never a value wrong: the
/// reader collides the same way.
fn key(path: &[u32], kind: Kind) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in path.iter().copied().chain([u32::MAX, kind as u32]) {
        h = (h ^ u64::from(p)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// Writes `value` against `mem`, which then holds it.
pub fn pack<T: Serialize>(value: &T, mem: &mut Memory) -> Result<Packed, Error> {
    let mut w = Writer {
        mem,
        out: Packed::default(),
        path: Vec::new(),
        counters: Vec::new(),
    };
    value.serialize(&mut w)?;
    Ok(w.out)
}

/// Reads a `T` written by `pack` against the same `mem`; every token must be used.
pub fn unpack<T: de::DeserializeOwned>(p: &Packed, mem: &mut Memory) -> Result<T, Error> {
    let mut r = Reader {
        p,
        mem,
        num: 0,
        str: 0,
        raw: 0,
        path: Vec::new(),
        variant: 0,
    };
    let v = T::deserialize(&mut r)?;
    if r.num != p.nums.len() || r.str != p.strs.len() || r.raw != p.raws.len() {
        return Err(Error("tokens left over".into()));
    }
    Ok(v)
}

struct Writer<'m> {
    mem: &'m mut Memory,
    out: Packed,
    /// Where the next value is.
    path: Vec<u32>,
    /// Per open compound, the number of its next part.
    counters: Vec<u32>,
}

impl Writer<'_> {
    fn num(&mut self, kind: Kind, v: i64) {
        let r = self.mem.num_residual(key(&self.path, kind), v);
        self.out.nums.push(r);
    }

    fn float(&mut self, v: f64) {
        let q = (v * 1000.0).round();
        // Thousandths only where reading them back gives the same bits.
        if q.abs() < MAX_MILLIS && ((q as i64) as f64 / 1000.0).to_bits() == v.to_bits() {
            self.num(Kind::Float, (q as i64) << 1);
        } else {
            self.num(Kind::Float, RAW_FLOAT);
            let r = self.mem.raw_residual(key(&self.path, Kind::Raw), v.to_bits());
            self.out.raws.push(r);
        }
    }

    fn open(&mut self) {
        self.counters.push(0);
    }

    /// The next part of the innermost compound, at its own path.
    fn part<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        let n = self.counters.last().copied().unwrap_or(0);
        self.path.push(n);
        let r = v.serialize(&mut *self);
        self.path.pop();
        if let Some(c) = self.counters.last_mut() {
            *c += 1;
        }
        r
    }

    fn close(&mut self) {
        self.counters.pop();
    }

    fn len(&mut self, len: Option<usize>) -> Result<(), Error> {
        let len = len.ok_or_else(|| Error("a sequence of unknown length".into()))?;
        self.num(Kind::Len, len as i64);
        Ok(())
    }
}

impl<'a, 'm> ser::Serializer for &'a mut Writer<'m> {
    type Ok = ();
    type Error = Error;
    type SerializeSeq = Self;
    type SerializeTuple = Self;
    type SerializeTupleStruct = Self;
    type SerializeTupleVariant = Self;
    type SerializeMap = Self;
    type SerializeStruct = Self;
    type SerializeStructVariant = Self;

    fn is_human_readable(&self) -> bool {
        false
    }
    fn serialize_bool(self, v: bool) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i8(self, v: i8) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i16(self, v: i16) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i32(self, v: i32) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_i64(self, v: i64) -> Result<(), Error> {
        self.num(Kind::Value, v);
        Ok(())
    }
    fn serialize_u8(self, v: u8) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_u16(self, v: u16) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_u32(self, v: u32) -> Result<(), Error> {
        self.serialize_i64(i64::from(v))
    }
    fn serialize_u64(self, v: u64) -> Result<(), Error> {
        // The same 64 bits; read back with `as u64`.
        self.serialize_i64(v as i64)
    }
    fn serialize_f32(self, v: f32) -> Result<(), Error> {
        self.float(f64::from(v));
        Ok(())
    }
    fn serialize_f64(self, v: f64) -> Result<(), Error> {
        self.float(v);
        Ok(())
    }
    fn serialize_char(self, v: char) -> Result<(), Error> {
        self.serialize_i64(i64::from(u32::from(v)))
    }
    fn serialize_str(self, v: &str) -> Result<(), Error> {
        let s = self.mem.str_residual(key(&self.path, Kind::Str), v);
        self.out.strs.push(s);
        Ok(())
    }
    fn serialize_bytes(self, _: &[u8]) -> Result<(), Error> {
        Err(Error("bytes are not recorded as tokens".into()))
    }
    fn serialize_none(self) -> Result<(), Error> {
        self.num(Kind::Tag, 0);
        Ok(())
    }
    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<(), Error> {
        self.num(Kind::Tag, 1);
        v.serialize(self)
    }
    fn serialize_unit(self) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_struct(self, _: &'static str) -> Result<(), Error> {
        Ok(())
    }
    fn serialize_unit_variant(self, _: &'static str, i: u32, _: &'static str) -> Result<(), Error> {
        self.num(Kind::Variant, i64::from(i));
        Ok(())
    }
    fn serialize_newtype_struct<T: ?Sized + Serialize>(self, _: &'static str, v: &T) -> Result<(), Error> {
        v.serialize(self)
    }
    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        _: &'static str,
        i: u32,
        _: &'static str,
        v: &T,
    ) -> Result<(), Error> {
        self.num(Kind::Variant, i64::from(i));
        // Each variant's contents have paths of their own.
        self.path.push(i);
        let r = v.serialize(&mut *self);
        self.path.pop();
        r
    }
    fn serialize_seq(self, len: Option<usize>) -> Result<Self, Error> {
        self.len(len)?;
        self.open();
        Ok(self)
    }
    fn serialize_tuple(self, _: usize) -> Result<Self, Error> {
        self.open();
        Ok(self)
    }
    fn serialize_tuple_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        self.open();
        Ok(self)
    }
    fn serialize_tuple_variant(self, _: &'static str, i: u32, _: &'static str, _: usize) -> Result<Self, Error> {
        self.num(Kind::Variant, i64::from(i));
        self.path.push(i);
        self.open();
        Ok(self)
    }
    fn serialize_map(self, len: Option<usize>) -> Result<Self, Error> {
        self.len(len)?;
        self.open();
        Ok(self)
    }
    fn serialize_struct(self, _: &'static str, _: usize) -> Result<Self, Error> {
        self.open();
        Ok(self)
    }
    fn serialize_struct_variant(self, _: &'static str, i: u32, _: &'static str, _: usize) -> Result<Self, Error> {
        self.num(Kind::Variant, i64::from(i));
        self.path.push(i);
        self.open();
        Ok(self)
    }
}

/// A compound's parts, each at its own path.
macro_rules! parts {
    ($($tr:ident :: $f:ident),*) => {$(
        impl ser::$tr for &mut Writer<'_> {
            type Ok = ();
            type Error = Error;
            fn $f<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
                self.part(v)
            }
            fn end(self) -> Result<(), Error> {
                self.close();
                Ok(())
            }
        }
    )*};
}
parts!(
    SerializeSeq::serialize_element,
    SerializeTuple::serialize_element,
    SerializeTupleStruct::serialize_field
);

impl ser::SerializeStruct for &mut Writer<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, _: &'static str, v: &T) -> Result<(), Error> {
        self.part(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        Ok(())
    }
}

// Map values are parts like their keys (key n, value n + 1).
impl ser::SerializeMap for &mut Writer<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_key<T: ?Sized + Serialize>(&mut self, k: &T) -> Result<(), Error> {
        self.part(k)
    }
    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.part(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        Ok(())
    }
}

// A variant's number leaves the path with its compound.
impl ser::SerializeTupleVariant for &mut Writer<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), Error> {
        self.part(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        self.path.pop();
        Ok(())
    }
}

impl ser::SerializeStructVariant for &mut Writer<'_> {
    type Ok = ();
    type Error = Error;
    fn serialize_field<T: ?Sized + Serialize>(&mut self, _: &'static str, v: &T) -> Result<(), Error> {
        self.part(v)
    }
    fn end(self) -> Result<(), Error> {
        self.close();
        self.path.pop();
        Ok(())
    }
}

/// Walks the writer's paths in its order, making its predictions.
struct Reader<'p, 'm> {
    p: &'p Packed,
    mem: &'m mut Memory,
    num: usize,
    str: usize,
    raw: usize,
    path: Vec<u32>,
    /// The variant just read, for the `VariantAccess` that follows.
    variant: u32,
}

impl Reader<'_, '_> {
    fn num(&mut self, kind: Kind) -> Result<i64, Error> {
        let r = *self
            .p
            .nums
            .get(self.num)
            .ok_or_else(|| Error("out of numbers".into()))?;
        self.num += 1;
        Ok(self.mem.num_from_residual(key(&self.path, kind), r))
    }

    fn int<T: TryFrom<i64>>(&mut self, what: &str) -> Result<T, Error> {
        let v = self.num(Kind::Value)?;
        T::try_from(v).map_err(|_| Error(format!("{v} is not a {what}")))
    }

    fn string(&mut self) -> Result<String, Error> {
        let s = self
            .p
            .strs
            .get(self.str)
            .ok_or_else(|| Error("out of strings".into()))?;
        self.str += 1;
        self.mem
            .str_from_residual(key(&self.path, Kind::Str), s.as_deref())
            .ok_or_else(|| Error("an unchanged string with none before".into()))
    }

    fn float(&mut self) -> Result<f64, Error> {
        let n = self.num(Kind::Float)?;
        if n & 1 == 0 {
            return Ok((n >> 1) as f64 / 1000.0);
        }
        let r = *self.p.raws.get(self.raw).ok_or_else(|| Error("out of floats".into()))?;
        self.raw += 1;
        Ok(f64::from_bits(
            self.mem.raw_from_residual(key(&self.path, Kind::Raw), r),
        ))
    }

    fn len(&mut self) -> Result<usize, Error> {
        let n = self.num(Kind::Len)?;
        // No sequence is longer than the tokens left to fill it (an
        // element of a unit type aside, which nothing recorded has).
        usize::try_from(n)
            .ok()
            .filter(|n| *n <= self.p.nums.len() + self.p.strs.len())
            .ok_or_else(|| Error(format!("a length of {n}")))
    }

    /// `f` at the path of the variant just read.
    fn in_variant<T>(&mut self, f: impl FnOnce(&mut Self) -> Result<T, Error>) -> Result<T, Error> {
        self.path.push(self.variant);
        let r = f(self);
        self.path.pop();
        r
    }
}

macro_rules! ints {
    ($($f:ident $t:ty => $v:ident),*) => {$(
        fn $f<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
            v.$v(self.int::<$t>(stringify!($t))?)
        }
    )*};
}

impl<'de> de::Deserializer<'de> for &mut Reader<'_, '_> {
    type Error = Error;

    fn is_human_readable(&self) -> bool {
        false
    }
    fn deserialize_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error("tokens are not self-describing".into()))
    }
    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.num(Kind::Value)? {
            0 => v.visit_bool(false),
            1 => v.visit_bool(true),
            n => Err(Error(format!("{n} is not a bool"))),
        }
    }
    ints!(
        deserialize_i8 i8 => visit_i8,
        deserialize_i16 i16 => visit_i16,
        deserialize_i32 i32 => visit_i32,
        deserialize_i64 i64 => visit_i64,
        deserialize_u8 u8 => visit_u8,
        deserialize_u16 u16 => visit_u16,
        deserialize_u32 u32 => visit_u32
    );
    fn deserialize_u64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_u64(self.num(Kind::Value)? as u64)
    }
    fn deserialize_f32<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f32(self.float()? as f32)
    }
    fn deserialize_f64<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_f64(self.float()?)
    }
    fn deserialize_char<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let n = self.int::<u32>("char")?;
        v.visit_char(char::from_u32(n).ok_or_else(|| Error(format!("{n} is not a char")))?)
    }
    fn deserialize_str<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_string(self.string()?)
    }
    fn deserialize_string<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_string(self.string()?)
    }
    fn deserialize_bytes<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error("bytes are not recorded as tokens".into()))
    }
    fn deserialize_byte_buf<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error("bytes are not recorded as tokens".into()))
    }
    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        match self.num(Kind::Tag)? {
            0 => v.visit_none(),
            1 => v.visit_some(self),
            n => Err(Error(format!("{n} is not an option tag"))),
        }
    }
    fn deserialize_unit<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }
    fn deserialize_unit_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Error> {
        v.visit_unit()
    }
    fn deserialize_newtype_struct<V: Visitor<'de>>(self, _: &'static str, v: V) -> Result<V::Value, Error> {
        v.visit_newtype_struct(self)
    }
    fn deserialize_seq<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let n = self.len()?;
        v.visit_seq(Parts::new(self, n))
    }
    fn deserialize_tuple<V: Visitor<'de>>(self, n: usize, v: V) -> Result<V::Value, Error> {
        v.visit_seq(Parts::new(self, n))
    }
    fn deserialize_tuple_struct<V: Visitor<'de>>(self, _: &'static str, n: usize, v: V) -> Result<V::Value, Error> {
        v.visit_seq(Parts::new(self, n))
    }
    fn deserialize_map<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Error> {
        let n = self.len()?;
        // Keys and values are parts alike: twice as many.
        v.visit_map(Parts::new(self, n.saturating_mul(2)))
    }
    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _: &'static str,
        fields: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_seq(Parts::new(self, fields.len()))
    }
    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _: &'static str,
        _: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Error> {
        v.visit_enum(self)
    }
    fn deserialize_identifier<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error("tokens carry no names".into()))
    }
    fn deserialize_ignored_any<V: Visitor<'de>>(self, _: V) -> Result<V::Value, Error> {
        Err(Error("tokens are not self-describing".into()))
    }
}

/// The parts of a sequence, tuple, struct or map, each at its own path.
struct Parts<'a, 'p, 'm> {
    r: &'a mut Reader<'p, 'm>,
    next: u32,
    left: usize,
}

impl<'a, 'p, 'm> Parts<'a, 'p, 'm> {
    fn new(r: &'a mut Reader<'p, 'm>, left: usize) -> Self {
        Parts { r, next: 0, left }
    }

    fn part<'de, T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, Error> {
        self.left = self.left.saturating_sub(1);
        self.r.path.push(self.next);
        self.next += 1;
        let v = seed.deserialize(&mut *self.r);
        self.r.path.pop();
        v
    }
}

impl<'de> de::SeqAccess<'de> for Parts<'_, '_, '_> {
    type Error = Error;
    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.part(seed).map(Some)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left)
    }
}

impl<'de> de::MapAccess<'de> for Parts<'_, '_, '_> {
    type Error = Error;
    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, Error> {
        if self.left == 0 {
            return Ok(None);
        }
        self.part(seed).map(Some)
    }
    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, Error> {
        self.part(seed)
    }
    fn size_hint(&self) -> Option<usize> {
        Some(self.left / 2)
    }
}

impl<'de> de::EnumAccess<'de> for &mut Reader<'_, '_> {
    type Error = Error;
    type Variant = Self;
    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self), Error> {
        let n = self.num(Kind::Variant)?;
        let i = u32::try_from(n).map_err(|_| Error(format!("{n} is not a variant")))?;
        self.variant = i;
        let v = seed.deserialize(IntoDeserializer::<Error>::into_deserializer(i))?;
        Ok((v, self))
    }
}

impl<'de> de::VariantAccess<'de> for &mut Reader<'_, '_> {
    type Error = Error;
    fn unit_variant(self) -> Result<(), Error> {
        Ok(())
    }
    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, Error> {
        self.in_variant(|r| seed.deserialize(r))
    }
    fn tuple_variant<V: Visitor<'de>>(self, n: usize, v: V) -> Result<V::Value, Error> {
        self.in_variant(|r| v.visit_seq(Parts::new(r, n)))
    }
    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], v: V) -> Result<V::Value, Error> {
        self.in_variant(|r| v.visit_seq(Parts::new(r, fields.len())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::sample::{Gpm, GpuError, GpuReading, NodeSample, Xid};

    fn sample() -> NodeSample {
        NodeSample {
            seq: u64::MAX - 3,
            time_ms: -5,
            host: None,
            gpus: vec![
                GpuReading {
                    index: 0,
                    util_pct: Some(97),
                    power_w: Some(412.345),
                    pcie_tx_bytes_per_s: Some(1.5e12),
                    energy_mj: Some(u64::MAX),
                    xids: vec![Xid { xid: 79, time_ms: 3 }],
                    gpm: Some(Gpm {
                        sm_active_pct: 12.34,
                        sm_occupancy_pct: 0.1 + 0.2,
                        tensor_active_pct: -0.0,
                        dram_bw_pct: f64::NAN,
                    }),
                    ..GpuReading::default()
                },
                GpuReading {
                    index: 1,
                    error: Some(GpuError::Stuck {
                        text: "nvml_stuck: nvmlDeviceGetPowerUsage".into(),
                        for_ms: 9000,
                    }),
                    power_w: Some(1e300),
                    ..GpuReading::default()
                },
            ],
            ib_ports: vec![],
            sxids: vec![],
        }
    }

    fn same(a: &NodeSample, b: &NodeSample) -> bool {
        postcard::to_allocvec(a).ok() == postcard::to_allocvec(b).ok()
    }

    /// Bit for bit: every float, whole thousandths or not, NaN and -0.0;
    /// first against nothing, then against itself.
    #[test]
    fn a_sample_comes_back_exactly() {
        let s = sample();
        let (mut w, mut r) = (Memory::default(), Memory::default());
        for _ in 0..2 {
            let p = pack(&s, &mut w).expect("packs");
            let back: NodeSample = unpack(&p, &mut r).expect("unpacks");
            assert!(same(&back, &s), "{back:?}");
        }
        // Floats that are thousandths are numbers; the others travel raw.
        let v = (412.345f64, 0.5f32, 0.1 + 0.2, -0.0f64, 1e300);
        let p = pack(&v, &mut Memory::default()).expect("packs");
        assert_eq!(p.nums[..2], [412_345 << 1, 500 << 1], "{p:?}");
        assert_eq!(p.raws.len(), 3, "{p:?}");
        let back: (f64, f32, f64, f64, f64) = unpack(&p, &mut Memory::default()).expect("back");
        assert_eq!(format!("{back:?}"), format!("{v:?}"));
    }

    #[test]
    fn damaged_tokens_are_errors_not_panics() {
        let p = pack(&sample(), &mut Memory::default()).expect("packs");
        for cut in 0..p.nums.len() {
            let mut bad = p.clone();
            bad.nums.truncate(cut);
            assert!(
                unpack::<NodeSample>(&bad, &mut Memory::default()).is_err(),
                "cut at {cut}"
            );
        }
        let mut bad = p.clone();
        bad.nums[2] = i64::MAX;
        assert!(unpack::<NodeSample>(&bad, &mut Memory::default()).is_err());
    }
}
