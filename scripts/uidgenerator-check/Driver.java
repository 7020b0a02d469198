import com.baidu.fsg.uid.BitsAllocator;
import com.baidu.fsg.uid.impl.DefaultUidGenerator;
// gen <epochStr> <worker> <n>: n UIDs from Baidu's DefaultUidGenerator (default 28,22,13 bits)
// parse <epochStr> <uid>...: Baidu's parseUID of each
// alloc <delta> <worker> <seq>: BitsAllocator.allocate with the default bits
public class Driver {
    static DefaultUidGenerator g(String epoch, long worker) throws Exception {
        DefaultUidGenerator g = new DefaultUidGenerator();
        g.setEpochStr(epoch);
        g.setWorkerIdAssigner(() -> worker);
        g.afterPropertiesSet();
        return g;
    }
    public static void main(String[] a) throws Exception {
        switch (a[0]) {
            case "gen": { DefaultUidGenerator g = g(a[1], Long.parseLong(a[2])); int n = Integer.parseInt(a[3]);
                for (int i = 0; i < n; i++) System.out.println(g.getUID()); break; }
            case "parse": { DefaultUidGenerator g = g(a[1], 1);
                for (int i = 2; i < a.length; i++) System.out.println(g.parseUID(Long.parseLong(a[i]))); break; }
            case "alloc": { BitsAllocator b = new BitsAllocator(28, 22, 13);
                System.out.println(b.allocate(Long.parseLong(a[1]), Long.parseLong(a[2]), Long.parseLong(a[3]))); break; }
        }
    }
}
