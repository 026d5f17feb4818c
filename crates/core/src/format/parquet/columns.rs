//! Column normalisation: any integer width, Timestamp for `_ns`, LargeUtf8 / Utf8View / dictionaries and Float32
//! become the four scalar types; a column of the wrong type becomes per-record rejections that name the field.

use std::borrow::Cow;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{
    ArrowPrimitiveType, Float16Type, Float32Type, Float64Type, Int8Type, Int16Type, Int32Type, Int64Type,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType, TimestampSecondType, UInt8Type,
    UInt16Type, UInt32Type, UInt64Type,
};
use arrow_array::{Array, ArrayRef, BooleanArray, Float64Array, Int64Array, RecordBatch, StringArray, StructArray};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};

use crate::format::schema::{self, CANDIDATE_FIELDS, CANDIDATES, EOS_TOKEN_IDS};
use crate::ingest::raw::{Field, Found, RawCandidate, RawRecord, Val};

/// A column normalised to one of the four scalar types, or kept as is when it is none of them.
pub(super) enum Col {
    Absent,
    Str(StringArray),
    Int(Int64Array),
    Float(Float64Array),
    Bool(BooleanArray),
    Other(ArrayRef, &'static str),
}

pub(super) fn type_name(t: &DataType) -> &'static str {
    match t {
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "string",
        DataType::Float16 | DataType::Float32 | DataType::Float64 => "float",
        DataType::Boolean => "boolean",
        DataType::List(_) | DataType::LargeList(_) | DataType::FixedSizeList(..) | DataType::ListView(_) => "list",
        DataType::Struct(_) => "struct",
        DataType::Binary | DataType::LargeBinary | DataType::BinaryView | DataType::FixedSizeBinary(_) => "binary",
        DataType::Date32 | DataType::Date64 => "date",
        DataType::Decimal32(..) | DataType::Decimal64(..) | DataType::Decimal128(..) | DataType::Decimal256(..) => {
            "decimal"
        }
        _ => "unsupported",
    }
}

/// An integer or timestamp column as `i64` (timestamps in ns), each value through `f`; `None` from `f` is a null.
/// (These few conversions are written here rather than taken from arrow's `cast` kernel: that crate and the
/// comparison kernels it needs were about 140 s of the cold release build's CPU time, for five conversions.)
fn widened<T: ArrowPrimitiveType>(a: &ArrayRef, f: impl Fn(T::Native) -> Option<i64>) -> Option<Col> {
    let p = a.as_primitive_opt::<T>()?;
    Some(Col::Int(p.iter().map(|v| v.and_then(&f)).collect()))
}

/// A string column of any of Arrow's layouts (32- or 64-bit offsets, views, a dictionary of any of them) as one
/// with 32-bit offsets; `None` for another type, or strings too long for 32-bit offsets.
fn strings(a: &dyn Array) -> Option<StringArray> {
    let fits = |bytes: usize| i32::try_from(bytes).is_ok();
    match a.data_type() {
        DataType::Utf8 => a.as_string_opt::<i32>().cloned(),
        DataType::LargeUtf8 => {
            let s = a.as_string_opt::<i64>()?;
            fits(s.value_data().len()).then(|| s.iter().collect())
        }
        DataType::Utf8View => {
            let s = a.as_string_view_opt()?;
            fits(s.iter().flatten().map(str::len).sum()).then(|| s.iter().collect())
        }
        DataType::Dictionary(..) => {
            let d = a.as_any_dictionary_opt()?;
            let values = strings(d.values().as_ref())?;
            if values.is_empty() {
                // No value for a key to point at: every row is null.
                return Some(StringArray::new_null(a.len()));
            }
            let keys = d.normalized_keys();
            let each = (0..a.len()).map(|i| (a.is_valid(i) && values.is_valid(keys[i])).then(|| values.value(keys[i])));
            fits(each.clone().flatten().map(str::len).sum()).then(|| each.collect())
        }
        _ => None,
    }
}

impl Col {
    pub(super) fn of(array: Option<&ArrayRef>) -> Col {
        let Some(a) = array else { return Col::Absent };
        let dt = a.data_type();
        if *dt == DataType::Null {
            // An all-null column (pyarrow writes one for a field that is None throughout): no values.
            return Col::Absent;
        }
        let converted = match dt {
            DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View | DataType::Dictionary(..) => {
                strings(a.as_ref()).map(Col::Str)
            }
            DataType::Int64 => a.as_primitive_opt::<Int64Type>().cloned().map(Col::Int),
            DataType::Int8 => widened::<Int8Type>(a, |v| Some(i64::from(v))),
            DataType::Int16 => widened::<Int16Type>(a, |v| Some(i64::from(v))),
            DataType::Int32 => widened::<Int32Type>(a, |v| Some(i64::from(v))),
            DataType::UInt8 => widened::<UInt8Type>(a, |v| Some(i64::from(v))),
            DataType::UInt16 => widened::<UInt16Type>(a, |v| Some(i64::from(v))),
            DataType::UInt32 => widened::<UInt32Type>(a, |v| Some(i64::from(v))),
            // Past i64's range: null, as a safe cast makes it (and the field is then absent in that record).
            DataType::UInt64 => widened::<UInt64Type>(a, |v| i64::try_from(v).ok()),
            DataType::Timestamp(TimeUnit::Second, _) => {
                widened::<TimestampSecondType>(a, |v| v.checked_mul(1_000_000_000))
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                widened::<TimestampMillisecondType>(a, |v| v.checked_mul(1_000_000))
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                widened::<TimestampMicrosecondType>(a, |v| v.checked_mul(1_000))
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => widened::<TimestampNanosecondType>(a, Some),
            DataType::Float64 => a.as_primitive_opt::<Float64Type>().cloned().map(Col::Float),
            DataType::Float32 => a
                .as_primitive_opt::<Float32Type>()
                .map(|p| p.iter().map(|v| v.map(f64::from)).collect::<Float64Array>())
                .map(Col::Float),
            DataType::Float16 => a
                .as_primitive_opt::<Float16Type>()
                .map(|p| {
                    p.iter()
                        .map(|v| v.map(|x| f64::from(x.to_f32())))
                        .collect::<Float64Array>()
                })
                .map(Col::Float),
            DataType::Boolean => a.as_boolean_opt().cloned().map(Col::Bool),
            _ => None,
        };
        converted.unwrap_or_else(|| Col::Other(Arc::clone(a), type_name(dt)))
    }

    pub(super) fn is_null(&self, i: usize) -> bool {
        match self {
            Col::Absent => true,
            Col::Str(a) => a.is_null(i),
            Col::Int(a) => a.is_null(i),
            Col::Float(a) => a.is_null(i),
            Col::Bool(a) => a.is_null(i),
            Col::Other(a, _) => a.is_null(i),
        }
    }

    /// What a non-null value of this column is, for a field expecting another type.
    fn found(&self, i: usize) -> Found {
        match self {
            Col::Int(a) => Found::Int(a.value(i)),
            Col::Float(a) => Found::Float(a.value(i)),
            Col::Str(_) => Found::Str,
            Col::Bool(_) => Found::Bool,
            Col::Absent => Found::Column("absent"),
            Col::Other(_, t) => Found::Column(t),
        }
    }

    // The accessors below test the column's type once, then its null bit: they run for every field of every row.

    #[inline]
    fn str_at(&self, i: usize) -> Field<Cow<'_, str>> {
        match self {
            Col::Str(a) => (!a.is_null(i)).then(|| Val::Ok(Cow::Borrowed(a.value(i)))),
            _ => self.wrong(i),
        }
    }

    #[inline]
    fn int_at(&self, i: usize) -> Field<i64> {
        match self {
            Col::Int(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i))),
            _ => self.wrong(i),
        }
    }

    #[inline]
    #[expect(
        clippy::cast_precision_loss,
        reason = "an integer in a float field: small values (logprob, temperature)"
    )]
    fn float_at(&self, i: usize) -> Field<f64> {
        match self {
            Col::Float(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i))),
            Col::Int(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i) as f64)),
            _ => self.wrong(i),
        }
    }

    #[inline]
    fn bool_at(&self, i: usize) -> Field<bool> {
        match self {
            Col::Bool(a) => (!a.is_null(i)).then(|| Val::Ok(a.value(i))),
            _ => self.wrong(i),
        }
    }

    /// A field read from a column of another type: absent when null, else what the column holds.
    #[cold]
    fn wrong<T>(&self, i: usize) -> Field<T> {
        (!self.is_null(i)).then(|| Val::Wrong(self.found(i)))
    }
}

macro_rules! at {
    (Str, $c:expr, $i:expr) => {
        $c.str_at($i)
    };
    (Int, $c:expr, $i:expr) => {
        $c.int_at($i)
    };
    (Float, $c:expr, $i:expr) => {
        $c.float_at($i)
    };
    (Bool, $c:expr, $i:expr) => {
        $c.bool_at($i)
    };
}

/// A list column: offsets into a child column, or a column of another type.
pub(super) enum ListCol<C> {
    Absent,
    List {
        offsets: Vec<usize>,
        nulls: Option<NullBuffer>,
        child: C,
    },
    Other(ArrayRef, &'static str),
}

impl<C> ListCol<C> {
    fn of(array: Option<&ArrayRef>, child: impl FnOnce(&ArrayRef) -> Option<C>) -> Self {
        let Some(a) = array else {
            return ListCol::Absent;
        };
        let parts = match a.data_type() {
            DataType::List(_) => a.as_list_opt::<i32>().map(|l| {
                let offsets = l
                    .value_offsets()
                    .iter()
                    .map(|&o| usize::try_from(o).unwrap_or(0))
                    .collect();
                (offsets, l.nulls().cloned(), Arc::clone(l.values()))
            }),
            DataType::LargeList(_) => a.as_list_opt::<i64>().map(|l| {
                let offsets = l
                    .value_offsets()
                    .iter()
                    .map(|&o| usize::try_from(o).unwrap_or(0))
                    .collect();
                (offsets, l.nulls().cloned(), Arc::clone(l.values()))
            }),
            _ => None,
        };
        match parts.and_then(|(offsets, nulls, values)| child(&values).map(|c| (offsets, nulls, c))) {
            Some((offsets, nulls, child)) => ListCol::List { offsets, nulls, child },
            None => ListCol::Other(Arc::clone(a), type_name(a.data_type())),
        }
    }

    /// The child rows of row `i`, or what the column is when not a readable list.
    fn at(&self, i: usize) -> Option<Result<(&C, std::ops::Range<usize>), Found>> {
        match self {
            ListCol::Absent => None,
            ListCol::List { offsets, nulls, child } => {
                if nulls.as_ref().is_some_and(|n| n.is_null(i)) {
                    return None;
                }
                Some(Ok((child, offsets[i]..offsets[i + 1])))
            }
            ListCol::Other(a, t) => (!a.is_null(i)).then_some(Err(Found::Column(t))),
        }
    }
}

pub(super) struct CandidateCols {
    token_id: Col,
    text: Col,
    logprob: Col,
    special: Col,
}

macro_rules! columns {
    ($(($name:ident, $ty:ident)),* $(,)?) => {
        /// A scalar field, to read only the fields of a record's kind.
        #[allow(non_camel_case_types)]
        #[derive(Debug, Clone, Copy)]
        pub(super) enum FieldId { $( $name, )* }

        impl FieldId {
            pub(super) fn from_name(name: &str) -> Option<Self> {
                match name {
                    $( stringify!($name) => Some(FieldId::$name), )*
                    _ => None,
                }
            }
        }

        /// The normalised columns of one batch.
        pub(super) struct Cols {
            $( $name: Col, )*
            eos_token_ids: ListCol<Col>,
            candidates: ListCol<CandidateCols>,
            /// For each kind of [`schema::KINDS`], the fields of that kind that this batch has.
            fields_by_kind: Vec<Vec<FieldId>>,
        }

        impl Cols {
            pub(super) fn of(batch: &RecordBatch) -> Self {
                let fields_by_kind = schema::KINDS
                    .iter()
                    .map(|kind| {
                        schema::fields_of_kind(kind)
                            .iter()
                            .filter(|name| batch.column_by_name(name).is_some())
                            .filter_map(|name| FieldId::from_name(name))
                            .collect()
                    })
                    .collect();
                Cols {
                    $( $name: Col::of(batch.column_by_name(stringify!($name))), )*
                    eos_token_ids: ListCol::of(batch.column_by_name(EOS_TOKEN_IDS), |v| Some(Col::of(Some(v)))),
                    candidates: ListCol::of(batch.column_by_name(CANDIDATES), |v| {
                        let s: &StructArray = v.as_struct_opt()?;
                        Some(CandidateCols {
                            token_id: Col::of(s.column_by_name(CANDIDATE_FIELDS[0])),
                            text: Col::of(s.column_by_name(CANDIDATE_FIELDS[1])),
                            logprob: Col::of(s.column_by_name(CANDIDATE_FIELDS[2])),
                            special: Col::of(s.column_by_name(CANDIDATE_FIELDS[3])),
                        })
                    }),
                    fields_by_kind,
                }
            }

            pub(super) fn set<'a>(&'a self, field: FieldId, i: usize, r: &mut RawRecord<'a>) {
                match field {
                    $( FieldId::$name => r.$name = at!($ty, self.$name, i), )*
                }
            }

            pub(super) fn clear(field: FieldId, r: &mut RawRecord<'_>) {
                match field {
                    $( FieldId::$name => r.$name = None, )*
                }
            }

            /// The kind of row `i` (index into `schema::KINDS`), when it is one.
            #[inline]
            pub(super) fn kind_at(&self, i: usize) -> Option<usize> {
                match &self.kind {
                    Col::Str(a) if !a.is_null(i) => {
                        let k = a.value(i);
                        schema::KINDS.iter().position(|&known| known == k)
                    }
                    _ => None,
                }
            }

            /// Fills `buf` with row `i`: the fields of its kind (validation reads no others). Only the fields the
            /// previous row set are cleared, and a token's candidate list reuses the previous one's allocation.
            pub(super) fn fill<'a>(&'a self, i: usize, buf: &mut RowBuffer<'a>) {
                let r = &mut buf.record;
                // The kind's fields are all set below: those of another kind are cleared, those of a row of the
                // same kind (most rows follow one of their kind) are overwritten.
                let kind = self.kind_at(i);
                if let Some(prev) = buf.kind.take().filter(|&prev| Some(prev) != kind) {
                    for &field in &self.fields_by_kind[prev] {
                        Self::clear(field, r);
                    }
                }
                r.eos_token_ids = None;
                if let Some(Val::Ok(mut list)) = r.candidates.take() {
                    list.clear();
                    buf.spare = list;
                }
                r.kind = self.kind.str_at(i);
                let Some(kind) = kind else { return };
                buf.kind = Some(kind);
                for &field in &self.fields_by_kind[kind] {
                    self.set(field, i, r);
                }
                match schema::KINDS[kind] {
                    "meta" => {
                        r.eos_token_ids = self.eos_token_ids.at(i).map(|l| match l {
                            Ok((c, rows)) => Val::Ok(
                                rows.map(|j| c.int_at(j).unwrap_or(Val::Wrong(Found::Column("null")))).collect(),
                            ),
                            Err(found) => Val::Wrong(found),
                        });
                    }
                    "token" => {
                        r.candidates = self.candidates.at(i).map(|l| match l {
                            Ok((c, rows)) => {
                                let mut list = std::mem::take(&mut buf.spare);
                                list.extend(rows.map(|j| RawCandidate {
                                    token_id: c.token_id.int_at(j),
                                    text: c.text.str_at(j),
                                    logprob: c.logprob.float_at(j),
                                    special: c.special.bool_at(j),
                                }));
                                Val::Ok(list)
                            }
                            Err(found) => Val::Wrong(found),
                        });
                    }
                    _ => {}
                }
            }
        }
    };
}

/// One row at a time, reused from row to row of a batch (a record is ~2 KB of mostly absent fields).
#[derive(Default)]
pub(super) struct RowBuffer<'a> {
    pub(super) record: RawRecord<'a>,
    /// The kind of the row in `record` (index into `schema::KINDS`).
    pub(super) kind: Option<usize>,
    /// A cleared candidate list, kept for the next token.
    pub(super) spare: Vec<RawCandidate<'a>>,
}
crate::scalar_fields!(columns);
