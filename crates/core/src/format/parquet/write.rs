//! The writer: one column per field, zstd, row groups small enough to read one request's tokens alone.

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, BooleanBuilder, Float64Builder, Int64Builder, StringBuilder};
use arrow_array::{ArrayRef, ListArray, RecordBatch, StructArray};
use arrow_buffer::{NullBuffer, OffsetBuffer};
use arrow_schema::{DataType, Fields};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;

use crate::format::records::for_each_record;
use crate::format::schema::{self};
use crate::ingest::raw::{RawRecord, Val};
use crate::trace::Trace;

use super::*;

macro_rules! builders {
    ($(($name:ident, $ty:ident)),* $(,)?) => {
        /// Column builders for one batch of records.
        struct Builders {
            $( $name: builder!($ty), )*
            eos_offsets: Vec<i32>,
            eos_valid: Vec<bool>,
            eos_values: Int64Builder,
            cand_offsets: Vec<i32>,
            cand_valid: Vec<bool>,
            cand_token_id: Int64Builder,
            cand_text: StringBuilder,
            cand_logprob: Float64Builder,
            cand_special: BooleanBuilder,
            rows: usize,
        }

        impl Builders {
            fn new() -> Self {
                Builders {
                    $( $name: <builder!($ty)>::new(), )*
                    eos_offsets: vec![0],
                    eos_valid: Vec::new(),
                    eos_values: Int64Builder::new(),
                    cand_offsets: vec![0],
                    cand_valid: Vec::new(),
                    cand_token_id: Int64Builder::new(),
                    cand_text: StringBuilder::new(),
                    cand_logprob: Float64Builder::new(),
                    cand_special: BooleanBuilder::new(),
                    rows: 0,
                }
            }

            fn push(&mut self, r: &RawRecord<'_>) {
                $( self.$name.append_option(value!($ty, &r.$name)); )*
                match &r.eos_token_ids {
                    Some(Val::Ok(ids)) => {
                        for id in ids {
                            self.eos_values.append_option(if let Val::Ok(v) = id { Some(*v) } else { None });
                        }
                        self.eos_valid.push(true);
                    }
                    _ => self.eos_valid.push(false),
                }
                self.eos_offsets.push(i32::try_from(self.eos_values.len()).unwrap_or(i32::MAX));
                match &r.candidates {
                    Some(Val::Ok(list)) => {
                        for c in list {
                            self.cand_token_id.append_option(value!(Int, &c.token_id));
                            self.cand_text.append_option(value!(Str, &c.text));
                            self.cand_logprob.append_option(value!(Float, &c.logprob));
                            self.cand_special.append_option(value!(Bool, &c.special));
                        }
                        self.cand_valid.push(true);
                    }
                    _ => self.cand_valid.push(false),
                }
                self.cand_offsets.push(i32::try_from(self.cand_token_id.len()).unwrap_or(i32::MAX));
                self.rows += 1;
            }

            fn finish(&mut self) -> Result<RecordBatch, arrow_schema::ArrowError> {
                let mut columns: Vec<ArrayRef> = vec![ $( Arc::new(self.$name.finish()), )* ];
                let eos = ListArray::try_new(
                    schema::list_item(DataType::Int64),
                    OffsetBuffer::new(std::mem::replace(&mut self.eos_offsets, vec![0]).into()),
                    Arc::new(self.eos_values.finish()),
                    Some(NullBuffer::from(std::mem::take(&mut self.eos_valid))),
                )?;
                columns.push(Arc::new(eos));
                let DataType::Struct(fields) = schema::candidate_struct() else {
                    return Err(arrow_schema::ArrowError::SchemaError("candidate type".into()));
                };
                let fields: Fields = fields;
                let cands = StructArray::try_new(
                    fields,
                    vec![
                        Arc::new(self.cand_token_id.finish()),
                        Arc::new(self.cand_text.finish()),
                        Arc::new(self.cand_logprob.finish()),
                        Arc::new(self.cand_special.finish()),
                    ],
                    None,
                )?;
                let list = ListArray::try_new(
                    schema::list_item(schema::candidate_struct()),
                    OffsetBuffer::new(std::mem::replace(&mut self.cand_offsets, vec![0]).into()),
                    Arc::new(cands),
                    Some(NullBuffer::from(std::mem::take(&mut self.cand_valid))),
                )?;
                columns.push(Arc::new(list));
                self.rows = 0;
                RecordBatch::try_new(schema::arrow_schema(), columns)
            }
        }
    };
}

macro_rules! builder {
    (Str) => {
        StringBuilder
    };
    (Int) => {
        Int64Builder
    };
    (Float) => {
        Float64Builder
    };
    (Bool) => {
        BooleanBuilder
    };
}

macro_rules! value {
    (Str, $v:expr) => {
        match $v {
            Some(Val::Ok(s)) => Some(&**s),
            _ => None,
        }
    };
    ($other:ident, $v:expr) => {
        match $v {
            Some(Val::Ok(x)) => Some(*x),
            _ => None,
        }
    };
}

crate::scalar_fields!(builders);

/// Writes a trace as one Parquet file (zstd, row groups of [`WRITE_ROW_GROUP_ROWS`] rows).
pub fn write(trace: &Trace, path: &Path) -> Result<(), parquet::errors::ParquetError> {
    write_with_row_groups(trace, path, WRITE_ROW_GROUP_ROWS)
}

/// Writes a trace as one Parquet file with row groups of `rows_per_group` rows (tests use small ones).
pub fn write_with_row_groups(
    trace: &Trace,
    path: &Path,
    rows_per_group: usize,
) -> Result<(), parquet::errors::ParquetError> {
    let mut w = TraceWriter::create(path, rows_per_group)?;
    w.append(trace)?;
    w.close()
}

/// A Parquet trace written a part at a time (`synth --scenario xlarge`): each part's records after the last's, the
/// meta record of the first only, so memory holds one part and a row group.
pub struct TraceWriter {
    writer: ArrowWriter<File>,
    builders: Builders,
    rows_per_group: usize,
    parts: usize,
}

impl TraceWriter {
    /// Creates the file (zstd, row groups of `rows_per_group` rows).
    ///
    /// # Errors
    /// The file cannot be created.
    pub fn create(path: &Path, rows_per_group: usize) -> Result<Self, parquet::errors::ParquetError> {
        let rows_per_group = rows_per_group.max(1);
        let props = WriterProperties::builder()
            .set_compression(Compression::ZSTD(ZstdLevel::try_new(3)?))
            .set_max_row_group_row_count(Some(rows_per_group))
            // Small pages, so reading one request's candidates decodes a few thousand rows, not a row group's worth.
            .set_data_page_row_count_limit(WRITE_PAGE_ROWS)
            .build();
        let file = File::create(path)?;
        Ok(TraceWriter {
            writer: ArrowWriter::try_new(file, schema::arrow_schema(), Some(props))?,
            builders: Builders::new(),
            rows_per_group,
            parts: 0,
        })
    }

    /// Writes the records of `trace` (its meta record only if it is the first part).
    ///
    /// # Errors
    /// The writer failed.
    pub fn append(&mut self, trace: &Trace) -> Result<(), parquet::errors::ParquetError> {
        let first = self.parts == 0;
        self.parts += 1;
        let (writer, builders, rows_per_group) = (&mut self.writer, &mut self.builders, self.rows_per_group);
        for_each_record(trace, |r| {
            if !first && matches!(&r.kind, Some(Val::Ok(k)) if k == "meta") {
                return Ok(());
            }
            builders.push(r);
            if builders.rows >= rows_per_group {
                writer.write(&builders.finish()?)?;
            }
            Ok::<(), parquet::errors::ParquetError>(())
        })
    }

    /// Writes what is left and the footer.
    ///
    /// # Errors
    /// The writer failed.
    pub fn close(mut self) -> Result<(), parquet::errors::ParquetError> {
        if self.builders.rows > 0 {
            self.writer.write(&self.builders.finish()?)?;
        }
        self.writer.close()?;
        Ok(())
    }
}
