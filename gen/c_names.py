"""Names an exported function may not take (`export --name`): C's keywords, and what the C
compiler or the exported file's headers already declare, or what gen's own code uses.

A name of the C99 library (any header: GCC knows many of its functions as built-ins, declared
or not), one the included headers declare (stddef.h, stdint.h, stdlib.h, string.h, math.h,
immintrin.h, and omp.h, with the POSIX names that -fopenmp's -pthread brings in), one C
reserves, or gen's own would make the exported C fail to compile.
"""
import re

KEYWORDS = frozenset(
    "auto break case char const continue default do double else enum extern float for goto "
    "if inline int long register restrict return short signed sizeof static struct switch "
    "typedef union unsigned void volatile while _Bool _Complex _Imaginary".split())

# math.h and complex.h: each with its f and l variants
_MATH = ("acos acosh asin asinh atan atan2 atanh cbrt ceil copysign cos cosh erf erfc exp exp2 "
         "expm1 fabs fdim floor fma fmax fmin fmod frexp hypot ilogb ldexp lgamma llrint llround "
         "log log10 log1p log2 logb lrint lround modf nan nearbyint nextafter nexttoward pow "
         "remainder remquo rint round scalbln scalbn sin sinh sqrt tan tanh tgamma trunc "
         "cacos cacosh casin casinh catan catanh ccos ccosh cexp clog cpow csin csinh csqrt ctan "
         "ctanh cabs carg cimag conj cproj creal").split()

LIBRARY = frozenset((
    "main "
    # stdlib.h, string.h
    "abort abs atexit atof atoi atol atoll bsearch calloc div exit free getenv labs ldiv llabs "
    "lldiv malloc mblen mbstowcs mbtowc qsort rand realloc srand system wctomb wcstombs "
    "memchr memcmp memcpy memmove memset strcat strchr strcmp strcoll strcpy strcspn strerror "
    "strlen strncat strncmp strncpy strpbrk strrchr strspn strstr strtod strtof strtok strtol "
    "strtold strtoll strtoul strtoull strxfrm "
    # stdio.h
    "remove rename tmpfile tmpnam fclose fflush fopen freopen setbuf setvbuf fprintf fscanf "
    "printf scanf snprintf sprintf sscanf vfprintf vfscanf vprintf vscanf vsnprintf vsprintf "
    "vsscanf fgetc fgets fputc fputs getc getchar gets putc putchar puts ungetc fread fwrite "
    "fgetpos fseek fsetpos ftell rewind clearerr feof ferror perror stdin stdout stderr "
    # ctype.h, wctype.h
    "isalnum isalpha isblank iscntrl isdigit isgraph islower isprint ispunct isspace isupper "
    "isxdigit tolower toupper iswalnum iswalpha iswblank iswcntrl iswdigit iswgraph iswlower "
    "iswprint iswpunct iswspace iswupper iswxdigit iswctype wctype towlower towupper towctrans "
    "wctrans "
    # wchar.h
    "fwprintf fwscanf swprintf swscanf vfwprintf vfwscanf vswprintf vswscanf vwprintf vwscanf "
    "wprintf wscanf fgetwc fgetws fputwc fputws fwide getwc getwchar putwc putwchar ungetwc "
    "wcstod wcstof wcstold wcstol wcstoll wcstoul wcstoull wcscpy wcsncpy wmemcpy wmemmove "
    "wcscat wcsncat wcscmp wcscoll wcsncmp wcsxfrm wmemcmp wcschr wcscspn wcspbrk wcsrchr "
    "wcsspn wcsstr wcstok wmemchr wcslen wmemset wcsftime btowc wctob mbsinit mbrlen mbrtowc "
    "wcrtomb mbsrtowcs wcsrtombs "
    # inttypes.h, time.h, locale.h, signal.h, setjmp.h, fenv.h, stdarg.h, assert.h, errno.h
    "imaxabs imaxdiv strtoimax strtoumax wcstoimax wcstoumax clock difftime mktime time "
    "asctime ctime gmtime localtime strftime setlocale localeconv signal raise setjmp longjmp "
    "feclearexcept fegetexceptflag feraiseexcept fesetexceptflag fetestexcept fegetround "
    "fesetround fegetenv feholdexcept fesetenv feupdateenv va_start va_arg va_end va_copy "
    "assert errno "
    # math.h's macros; the headers' other macros (NULL, limits)
    "fpclassify isfinite isgreater isgreaterequal isinf isless islessequal islessgreater "
    "isnan isnormal isunordered signbit math_errhandling complex imaginary I offsetof NULL NAN "
    "INFINITY HUGE_VAL HUGE_VALF HUGE_VALL EXIT_FAILURE EXIT_SUCCESS RAND_MAX MB_CUR_MAX "
    "MATH_ERRNO MATH_ERREXCEPT PTRDIFF_MAX PTRDIFF_MIN SIZE_MAX SIG_ATOMIC_MAX SIG_ATOMIC_MIN "
    "WCHAR_MAX WCHAR_MIN WINT_MAX WINT_MIN "
    # immintrin.h (mm_malloc.h); POSIX names string.h and stdlib.h declare under -pthread
    "posix_memalign strtok_r rand_r"
).split()) | {f + s for f in _MATH for s in ("", "f", "l")}

# leading underscore (C99 7.1.3), gen's prefix and gen itself (NAME_share would be gen_share),
# kernel names (with their parts: a name's NAME_taps could meet a kernel's), OpenMP's prefix,
# the headers' types and macros
RESERVED = re.compile(r"_.*|(?i:gen)(_.*)?|(reorder|resample)_.*_(scalar|avx2|avx512)(_.*)?"
                      r"|omp_.*|.*_t|FP_.*|U?INT.*_(MAX|MIN|C)")


def taken(name: str) -> bool:
    """Whether an exported function named `name` (a C identifier) would clash."""
    return name in LIBRARY or RESERVED.fullmatch(name) is not None
