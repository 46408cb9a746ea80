// awaitable: Boost.Asio's C++20 coroutines, as the executor runs prompts on the io thread with
// them (executor.hpp). Include this instead of <boost/asio/awaitable.hpp>:
//   - Boost 1.74's awaitable.hpp uses std::exchange without including <utility>;
//   - GCC 12 warns -Wmismatched-new-delete at the end of every coroutine whose frame asio
//     allocates: the frame's class-specific operator new (awaitable_frame_base, through asio's
//     recycling allocator) is paired with its own operator delete, which GCC fails to see
//     (GCC bug 105481 family). The warning is off for the rest of each file that includes this,
//     as it fires at each coroutine's closing brace there; builds with -Werror would fail on it.
#pragma once

#include <utility>

#include <boost/asio/awaitable.hpp>

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
