#include "operand.hpp"

#include <Python.h>
#include <nanobind/stl/string.h>

#include "fp4sim/core/error.hpp"
#include "fp4sim/core/gemm_call.hpp"
#include "fp4sim/core/quantize_call.hpp"
#include "fp4sim/front/analysis_arguments.hpp"
#include "fp4sim/front/recipe_spec.hpp"

namespace nb = nanobind;

namespace fp4sim::python {

namespace {

std::string type_of(nb::handle value) { return nb::cast<std::string>(value.type().attr("__name__")); }

// NumPy's scalars (and 0-d arrays) by their dtype's kind: 'b' bool, 'i'/'u' integers, 'f' floats.
char numpy_kind(nb::handle value) {
  if (!nb::hasattr(value, "dtype") || !nb::hasattr(value, "ndim") || nb::cast<int>(value.attr("ndim")) != 0) return 0;
  const nb::object kind = value.attr("dtype").attr("kind");
  return nb::isinstance<nb::str>(kind) ? nb::cast<std::string>(kind)[0] : 0;
}

// The UTF-8 bytes of a Python str; a str UTF-8 cannot encode (a lone surrogate, "\udc80") is a UsageError
// naming `what`, where nanobind's cast would throw a bare std::bad_cast.
std::string utf8(const std::string& what, nb::handle text) {
  Py_ssize_t size = 0;
  const char* bytes = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (bytes == nullptr) {
    PyErr_Clear();
    throw UsageError(what + ": not text UTF-8 can encode (a lone surrogate)");
  }
  return std::string(bytes, static_cast<std::size_t>(size));
}

[[noreturn]] void wrong_type(std::string_view key, const char* wanted, nb::handle value) {
  throw UsageError("{" + std::string(key) + "}: expected " + wanted + ", got " + type_of(value));
}

// An exact Python int of `value` (an int or a NumPy integer), or a UsageError.
nb::object whole_number(std::string_view key, nb::handle value) {
  const char kind = numpy_kind(value);
  const bool is_int = PyLong_Check(value.ptr()) && !PyBool_Check(value.ptr());
  if (!is_int && kind != 'i' && kind != 'u') wrong_type(key, "an integer", value);
  return nb::steal(PyNumber_Index(value.ptr()));
}

template <class Call>
front::ArgValue keyword_value(const front::Argument<Call>& row, nb::handle value) {
  const std::string key(row.key);
  switch (row.type) {
    case front::ArgType::switch_:
      if (!PyBool_Check(value.ptr()) && numpy_kind(value) != 'b') wrong_type(key, "a bool (True or False)", value);
      return PyObject_IsTrue(value.ptr()) == 1;
    case front::ArgType::integer: {
      const nb::object n = whole_number(key, value);
      int overflow = 0;
      const long long v = PyLong_AsLongLongAndOverflow(n.ptr(), &overflow);
      if (overflow != 0 || (row.min <= row.max && (v < row.min || v > row.max))) {
        throw UsageError("{" + key + "}: must be between " + std::to_string(row.min) + " and " + std::to_string(row.max) +
                         ", got " + nb::cast<std::string>(nb::str(n)));
      }
      return static_cast<std::int64_t>(v);
    }
    case front::ArgType::count: {
      const nb::object n = whole_number(key, value);
      const unsigned long long v = PyLong_AsUnsignedLongLong(n.ptr());
      if (PyErr_Occurred()) {
        PyErr_Clear();
        throw UsageError("{" + key + "}: expected an integer in 0..2^64-1, got " + nb::cast<std::string>(nb::str(n)));
      }
      return static_cast<std::uint64_t>(v);
    }
    case front::ArgType::real: {
      const char kind = numpy_kind(value);
      const bool number = (PyLong_Check(value.ptr()) || PyFloat_Check(value.ptr())) && !PyBool_Check(value.ptr());
      if (!number && kind != 'f' && kind != 'i' && kind != 'u') wrong_type(key, "a number", value);
      const double v = PyFloat_AsDouble(value.ptr());
      if (PyErr_Occurred()) {  // an int beyond double's range
        PyErr_Clear();
        throw UsageError("{" + key + "}: " + nb::cast<std::string>(nb::str(value)) + " is beyond the range of a double");
      }
      return v;
    }
    case front::ArgType::text:
      if (!nb::isinstance<nb::str>(value)) wrong_type(key, "a string", value);
      // "" is the call's "not given": an empty text must be refused, not read as the default
      if (nb::len(value) == 0) throw UsageError(key + "='': an empty value names nothing (None keeps the default)");
      return utf8("{" + key + "}", value);
  }
  throw std::logic_error("keyword_value: unknown argument type");
}

std::string known_keys(std::span<const front::Argument<RecipeOverrides>> rows) {
  std::string known;
  for (const auto& row : rows) {
    if (row.key != "recipe") known += (known.empty() ? "" : ", ") + std::string(row.key);
  }
  return known;
}

}  // namespace

template <class Call>
bool set_keyword(std::span<const front::Argument<Call>> rows, Call& call, std::string_view key, nb::handle value) {
  for (const front::Argument<Call>& row : rows) {
    if (row.key != key) continue;
    if (!value.is_none()) row.set(call, keyword_value(row, value));
    return true;
  }
  return false;
}

template bool set_keyword(std::span<const front::Argument<RecipeOverrides>>, RecipeOverrides&, std::string_view,
                          nb::handle);
template bool set_keyword(std::span<const front::Argument<QuantizeCall>>, QuantizeCall&, std::string_view, nb::handle);
template bool set_keyword(std::span<const front::Argument<GemmCall>>, GemmCall&, std::string_view, nb::handle);
template bool set_keyword(std::span<const front::Argument<ConvertCall>>, ConvertCall&, std::string_view, nb::handle);
template bool set_keyword(std::span<const front::Argument<MmaCall>>, MmaCall&, std::string_view, nb::handle);
template bool set_keyword(std::span<const front::Argument<VerifyQuantizeCall>>, VerifyQuantizeCall&, std::string_view,
                          nb::handle);
template bool set_keyword(std::span<const front::Argument<VerifyGemmCall>>, VerifyGemmCall&, std::string_view,
                          nb::handle);
template bool set_keyword(std::span<const front::Argument<replay::Call>>, replay::Call&, std::string_view, nb::handle);
template bool set_keyword(std::span<const front::Argument<sweep::Call>>, sweep::Call&, std::string_view, nb::handle);

RecipeOverrides overrides_from(const std::string& recipe, const nb::dict& d) {
  RecipeOverrides o = front::recipe_spec(recipe);  // the keywords override the spec, as they override a preset
  const auto rows = front::recipe_arguments();
  for (auto [key, value] : d) {
    const std::string k = utf8("a recipe override's name", key);
    if (k == "recipe" || !set_keyword(rows, o, k, value)) {
      throw UsageError("unknown recipe override '" + k + "' (known: " + known_keys(rows) + ")");
    }
  }
  return o;
}

GemmCall gemm_call_from(const std::string& recipe, const nb::dict& overrides, const nb::dict& args) {
  GemmCall g;
  g.recipe = overrides_from(recipe, overrides);
  for (auto [key, value] : args) {
    const std::string k = utf8("a GEMM option's name", key);
    if (!set_keyword(front::gemm_arguments(), g, k, value)) throw UsageError("unknown GEMM option '" + k + "'");
  }
  return g;
}

QuantizeCall quantize_call_from(const std::string& recipe, const nb::dict& overrides, const std::string& role,
                                nb::handle amax_ref, nb::handle seed) {
  QuantizeCall call;
  call.recipe = overrides_from(recipe, overrides);
  call.role = role;
  set_keyword(front::quantize_arguments(), call, "amax_ref", amax_ref);
  set_keyword(front::quantize_arguments(), call, "seed", seed);
  return call;
}

ResolvedOperand resolve_operand(const QuantizeCall& quantize, const std::string& where) {
  const std::size_t dot = where.find('.');
  if (dot == std::string::npos) {
    QuantizeCall call = quantize;
    call.role = where;
    QuantizeCall::Resolved r = call.resolve();
    return {r.recipe, r.request};
  }
  const std::string side = where.substr(dot + 1);
  if (side != "a" && side != "b") {
    throw UsageError("operand '" + where + "': expected a role or <gemm>.a / <gemm>.b (fprop.a, wgrad.b, ...)");
  }
  GemmCall call;
  call.recipe = quantize.recipe;
  call.gemm = where.substr(0, dot);
  call.seed = quantize.seed;
  (side == "a" ? call.a : call.b) = quantize.operand;
  GemmCall::Resolved r = call.resolve();
  return {r.recipe, side == "a" ? r.a : r.b};
}

}  // namespace fp4sim::python
